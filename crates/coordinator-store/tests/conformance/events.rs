//! Trigger events (`Store::admit_event`, `Store::event_run`): an event id
//! admits at most one run per workflow and trigger, recorded in the
//! admission's own transaction.

use std::collections::BTreeSet;

use coordinator_store::{Admission, Decision, Guarded, RunFilter, Store, StoreError, TriggerEvent};

use super::ok;
use super::support::{T0, TestDb, first, new_run, put_flagship_package, run_id, workflow};

const OWNER: &str = "trigger:registry";

fn event(trigger: &str, id: &str) -> TriggerEvent {
    TriggerEvent { trigger: trigger.to_owned(), event_id: id.to_owned() }
}

async fn runs(store: &Store) -> usize {
    ok(store.list_runs(&RunFilter::default(), None, 500).await, "list").runs.len()
}

pub(crate) async fn an_event_admits_once_and_replays_its_run(store: &Store) {
    let wf = workflow();
    let e1 = event("submitted", "evt-1");
    assert_eq!(ok(store.event_run("reviewed-notice", &e1).await, "unseen"), None);
    let new = new_run(&wf, &run_id(1), OWNER, Some("key-1"), T0);
    let created = store.admit_event(&new, &e1, || Ok::<_, StoreError>(first(&wf, &new))).await;
    assert_eq!(ok(created, "admit"), Admission::Created(run_id(1)));
    assert_eq!(ok(store.event_run("reviewed-notice", &e1).await, "seen").as_deref(), Some(run_id(1).as_str()));

    // The same event again, even with another key and input: its run, nothing decided or written.
    let replay = coordinator_store::NewRun {
        input_digest: "sha256:other".into(),
        ..new_run(&wf, &run_id(2), OWNER, Some("key-2"), T0 + 5)
    };
    let again = store.admit_event(&replay, &e1, || Err::<Decision, _>("a replayed event must not be decided")).await;
    assert_eq!(ok(again, "replay"), Admission::Existing(run_id(1)));

    // Another delivery (new event id) with the same key: the same run, and its id is remembered too.
    let e2 = event("submitted", "evt-2");
    let same_key = new_run(&wf, &run_id(3), OWNER, Some("key-1"), T0 + 6);
    let by_key = store.admit_event(&same_key, &e2, || Err::<Decision, _>("the key admitted a run before")).await;
    assert_eq!(ok(by_key, "same key"), Admission::Existing(run_id(1)));
    assert_eq!(ok(store.event_run("reviewed-notice", &e2).await, "e2").as_deref(), Some(run_id(1).as_str()));

    // Event ids are scoped per workflow and trigger.
    let other_trigger = event("amended", "evt-1");
    assert_eq!(ok(store.event_run("reviewed-notice", &other_trigger).await, "other trigger"), None);
    assert_eq!(ok(store.event_run("other-workflow", &e1).await, "other workflow"), None);
    let fresh = new_run(&wf, &run_id(4), OWNER, Some("key-4"), T0 + 7);
    let created = store.admit_event(&fresh, &other_trigger, || Ok::<_, StoreError>(first(&wf, &fresh))).await;
    assert_eq!(ok(created, "other trigger admits"), Admission::Created(run_id(4)));
    assert_eq!(runs(store).await, 2);
}

pub(crate) async fn a_refused_admission_records_no_event(store: &Store) {
    let wf = workflow();
    let e1 = event("submitted", "evt-refused");
    let new = new_run(&wf, &run_id(1), OWNER, Some("key-1"), T0);
    let refused = store.admit_event(&new, &e1, || Err::<Decision, _>("the decision failed")).await;
    assert!(matches!(refused, Err(StoreError::Rejected(_))), "{refused:?}");
    assert_eq!(ok(store.event_run("reviewed-notice", &e1).await, "not recorded"), None);
    assert_eq!(runs(store).await, 0);

    // A key reused with another input admits nothing and records no event either.
    let plain = new_run(&wf, &run_id(2), OWNER, Some("key-1"), T0);
    ok(store.admit(&plain, || Ok::<_, StoreError>(first(&wf, &plain))).await, "plain admission");
    let other = coordinator_store::NewRun {
        input_digest: "sha256:other".into(),
        ..new_run(&wf, &run_id(3), OWNER, Some("key-1"), T0)
    };
    let reused = store.admit_event(&other, &e1, || Ok::<_, StoreError>(first(&wf, &other))).await;
    assert!(matches!(reused, Err(StoreError::KeyReused { .. })), "{reused:?}");
    assert_eq!(ok(store.event_run("reviewed-notice", &e1).await, "still not recorded"), None);
    assert_eq!(runs(store).await, 1);
}

pub(crate) async fn concurrent_deliveries_of_one_event_create_one_run(store: &Store) {
    let wf = std::sync::Arc::new(workflow());
    let mut tasks = Vec::new();
    for n in 0..20 {
        let (store, wf) = (store.clone(), wf.clone());
        tasks.push(tokio::spawn(async move {
            // Each delivery computes another key: only the event id says they are one event.
            let key = format!("key-{n}");
            let new = new_run(&wf, &run_id(100 + n), OWNER, Some(&key), T0);
            store.admit_event(&new, &event("submitted", "evt-once"), || Ok::<_, StoreError>(first(&wf, &new))).await
        }));
    }
    let mut ids = BTreeSet::new();
    let mut created = 0;
    for task in tasks {
        let admission = ok(task.await.unwrap_or_else(|e| panic!("task: {e}")), "concurrent delivery");
        created += usize::from(matches!(admission, Admission::Created(_)));
        ids.insert(admission.run_id().to_owned());
    }
    assert_eq!((created, ids.len()), (1, 1), "one run, created once: {ids:?}");
    assert_eq!(runs(store).await, 1);
}

/// An admission from an event is written in a transaction with its event row;
/// a plain one (on PostgreSQL a single statement): both leave the same rows.
pub async fn both_admission_paths_write_the_same_rows(store: &Store) {
    let wf = workflow();
    let plain = new_run(&wf, &run_id(1), "alice", Some("k-1"), T0);
    let from_event = new_run(&wf, &run_id(2), "alice", Some("k-2"), T0);
    let created = store.admit(&plain, || Ok::<_, StoreError>(first(&wf, &plain))).await;
    assert!(matches!(created, Ok(Admission::Created(_))), "{created:?}");
    let created =
        store.admit_event(&from_event, &event("t", "e-1"), || Ok::<_, StoreError>(first(&wf, &from_event))).await;
    assert!(matches!(created, Ok(Admission::Created(_))), "{created:?}");
    let (a, b) = (ok(store.work_of(&plain.id).await, "plain"), ok(store.work_of(&from_event.id).await, "event"));
    assert!(!a.outbox.is_empty() && !a.timers.is_empty() && !a.audit.is_empty(), "{a:?}");
    assert_eq!(a, b);
    let (ra, rb) = (ok(store.load(&plain.id).await, "plain"), ok(store.load(&from_event.id).await, "event"));
    let (ra, rb) = (ra.unwrap_or_else(|| panic!("plain run")), rb.unwrap_or_else(|| panic!("event run")));
    assert_eq!((ra.state, ra.held, ra.version, ra.snapshot.len()), (rb.state, rb.held, rb.version, rb.snapshot.len()));
    // The same key again gives the same run and writes nothing.
    let again = store.admit(&plain, || Err::<Decision, _>("an existing run must not be decided again")).await;
    assert!(matches!(again, Ok(Admission::Existing(ref id)) if *id == plain.id), "{again:?}");
    assert_eq!(ok(store.work_of(&plain.id).await, "plain again"), a);
}

/// `Store::admit_guarded` inserts only while the gate is open — no restore
/// hold, the revision active, the key unused — and otherwise writes nothing
/// and hands the decision back (the caller reads the gate and admits with
/// `admit_checked`, which these cases also check).
pub(crate) async fn a_guarded_admission_writes_only_through_an_open_gate(db: &TestDb) {
    let store: &Store = db;
    let wf = workflow();
    put_flagship_package(store, &wf).await;
    let closed = |what: &str, outcome: Result<Guarded, StoreError>| match ok(outcome, what) {
        Guarded::Closed(decision) => decision,
        Guarded::Created => panic!("{what}: admitted through a closed gate"),
    };

    // Not active yet: nothing is written, on either backend.
    let new = new_run(&wf, &run_id(1), "alice", Some("key-1"), T0);
    closed("not active", store.admit_guarded(&new, || Ok::<_, StoreError>(first(&wf, &new))).await);
    assert_eq!(ok(store.load(&new.id).await, "load"), None);

    ok(store.activate("reviewed-notice", &wf.revision, T0, None).await, "activate");
    ok(store.place_hold(T0, "ops", None).await, "hold");
    closed("held", store.admit_guarded(&new, || Ok::<_, StoreError>(first(&wf, &new))).await);
    assert_eq!(ok(store.load(&new.id).await, "load"), None);
    ok(store.release_hold(T0, "ops", None).await, "release");

    // Open: admitted (in one statement on PostgreSQL, one transaction on SQLite).
    let guarded = ok(store.admit_guarded(&new, || Ok::<_, StoreError>(first(&wf, &new))).await, "open");
    assert!(matches!(guarded, Guarded::Created), "admitted through an open gate");
    let work = ok(store.work_of(&run_id(1)).await, "work");
    assert!(!work.outbox.is_empty() && !work.timers.is_empty(), "admitted with its first work");

    // The key is taken now: nothing more is written, and the gate names the run.
    let again = new_run(&wf, &run_id(2), "alice", Some("key-1"), T0 + 1);
    let decision = closed("key taken", store.admit_guarded(&again, || Ok::<_, StoreError>(first(&wf, &again))).await);
    assert_eq!(ok(store.load(&again.id).await, "load"), None);
    // The caller goes on with the decision handed back: the key's run.
    let admitted = store.admit_checked(&again, || Ok::<_, StoreError>(decision)).await;
    assert_eq!(ok(admitted, "checked"), Admission::Existing(run_id(1)));
    let gate = ok(store.admission_gate("reviewed-notice", "alice", Some("key-1")).await, "gate");
    assert_eq!(gate.keyed.map(|k| k.admission_for(&again)).and_then(Result::ok), Some(Admission::Existing(run_id(1))));
}
