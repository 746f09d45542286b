//! The completion-reference index (`Store::waiting_on`) and cross-process
//! wake-ups (`Store::wakeups`).

use std::time::Duration;

use coordinator_core::machine::event::{Event, Timer};
use coordinator_store::Store;

use super::support::{T0, TestDb, admit, deciding, run_id, workflow};
use super::{accepted_read, accepted_review, ok};

/// How long a wake-up may take before the test fails (a failure guard, not a speed claim).
const WAKE_GUARD: Duration = Duration::from_secs(10);
/// How long SQLite's subscription is watched to stay silent.
const SILENCE: Duration = Duration::from_millis(200);

pub(crate) async fn open_waits_are_indexed_by_reference(store: &Store) {
    let wf = workflow();
    for n in 1..=2 {
        let id = admit(store, &wf, &run_id(n), T0).await;
        ok(store.apply(&id, T0 + 1, deciding(&wf, &accepted_read(), T0 + 1)).await, "read");
        assert_eq!(ok(store.waiting_on("shared-ref").await, "before the wait").len(), usize::from(n > 1));
        let review = accepted_review("shared-ref");
        ok(store.apply(&id, T0 + 2, deciding(&wf, &review, T0 + 2)).await, "review requested");
    }
    let both = vec![(run_id(1), "await-review".to_owned()), (run_id(2), "await-review".to_owned())];
    assert_eq!(ok(store.waiting_on("shared-ref").await, "waiting"), both);
    assert_eq!(ok(store.waiting_on("other-ref").await, "other"), vec![]);

    // Run 1 is cancelled while waiting: its onCancel route resolves the wait.
    ok(store.apply(&run_id(1), T0 + 3, deciding(&wf, &Event::CancelRequested, T0 + 3)).await, "cancel");
    let left = vec![(run_id(2), "await-review".to_owned())];
    assert_eq!(ok(store.waiting_on("shared-ref").await, "after ResolveWait"), left);

    // Run 2 reaches its deadline while waiting: EndRun removes all of its rows.
    let deadline = T0 + i64::try_from(wf.definition.deadline_seconds).unwrap_or(0) * 1000;
    let due = Event::TimerDue { timer: Timer::RunDeadline };
    ok(store.apply(&run_id(2), deadline, deciding(&wf, &due, deadline)).await, "deadline");
    assert_eq!(ok(store.waiting_on("shared-ref").await, "after EndRun"), vec![]);
}

/// Two handles on one database: a subscriber on one is woken by work the other
/// commits (PostgreSQL `NOTIFY`), not by work its own handle commits (its
/// process wakes its worker in-process); on SQLite subscriptions stay silent.
pub(crate) async fn work_committed_elsewhere_wakes_a_listener_on_postgres(db: &TestDb) {
    let other = ok(Store::connect(&db.url).await, "second handle");
    let mut theirs = ok(other.wakeups().await, "subscribe on the other handle");
    let mut mine = ok(db.wakeups().await, "subscribe on the committing handle");
    let bound = if db.is_postgres() { WAKE_GUARD } else { SILENCE };
    let waiting = tokio::spawn(async move { tokio::time::timeout(bound, theirs.next()).await.is_ok() });
    let wf = workflow();
    admit(db, &wf, &run_id(1), T0).await; // queues the first attempt and the deadline timer
    let woken = waiting.await.unwrap_or_else(|e| panic!("waiting task: {e}"));
    assert_eq!(woken, db.is_postgres(), "woken across handles exactly on PostgreSQL");
    // The other subscriber has its notification: this one was sent the same and ignored it.
    let own = tokio::time::timeout(SILENCE, mine.next()).await.is_ok();
    assert!(!own, "a handle's own commit does not wake its own subscriber");
    admit(&other, &wf, &run_id(2), T0).await;
    let crossed = tokio::time::timeout(bound, mine.next()).await.is_ok();
    assert_eq!(crossed, db.is_postgres(), "the other handle's commit wakes it");
    other.close().await;
}
