//! A run's trace parent (migration 0010): the `traceparent` its admitting
//! caller sent is stored with the run on every admission path (PostgreSQL's
//! one statement for a plain admission, the transaction for one from a
//! trigger event and on SQLite) and comes back from every read of the run
//! and every claim of its work; a run admitted without one has none.

use coordinator_core::machine::event::Timer;
use coordinator_store::{
    Admission, ClaimLimits, NewRun, RunFilter, RunMeta, Store, StoreError, TriggerEvent, WorkScope,
};

use super::support::{T0, first, new_run, run_id, workflow};
use super::{LEASE_MS, ok};

const TRACE_PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The trace parent run `n` of the test is admitted with: the odd ones have one.
fn trace_parent_of(n: u32) -> Option<String> {
    (n % 2 == 1).then(|| TRACE_PARENT.to_owned())
}

/// Runs 1 and 2 admitted plainly, 3 and 4 from trigger events.
async fn admit_four(store: &Store) -> Vec<(String, Option<String>)> {
    let wf = workflow();
    let mut runs = Vec::new();
    for n in 1..=4 {
        let new = NewRun { trace_parent: trace_parent_of(n), ..new_run(&wf, &run_id(n), "alice", None, T0) };
        let decide = || Ok::<_, StoreError>(first(&wf, &new));
        let admitted = if n <= 2 {
            store.admit(&new, decide).await
        } else {
            let event = TriggerEvent { trigger: "submitted".into(), event_id: format!("evt-{n}") };
            store.admit_event(&new, &event, decide).await
        };
        assert_eq!(ok(admitted, "admit"), Admission::Created(run_id(n)));
        runs.push((run_id(n), trace_parent_of(n)));
    }
    runs
}

fn trace_of<'a>(runs: &'a [(String, Option<String>)], id: &str) -> &'a Option<String> {
    match runs.iter().find(|(run, _)| run == id) {
        Some((_, trace_parent)) => trace_parent,
        None => panic!("run {id} was not admitted by the test"),
    }
}

pub(crate) async fn a_run_keeps_its_trace_parent_for_every_read(store: &Store) {
    let wf = workflow();
    let runs = admit_four(store).await;
    for (id, trace_parent) in &runs {
        let row = ok(store.load(id).await, "load").unwrap_or_else(|| panic!("run {id}"));
        assert_eq!(&row.trace_parent, trace_parent, "load of {id}");
        let meta = ok(store.run_meta(id).await, "run meta");
        assert_eq!(meta, Some(RunMeta { revision: wf.revision.clone(), trace_parent: trace_parent.clone() }));
        assert_eq!(ok(store.revision_of(id).await, "revision"), Some(wf.revision.clone()));
    }
    assert_eq!(ok(store.run_meta(&run_id(9)).await, "no such run"), None);
    let listed = ok(store.list_runs(&RunFilter::default(), None, 10).await, "list").runs;
    let listed: Vec<_> = listed.into_iter().map(|r| (r.id, r.trace_parent)).collect();
    assert_eq!(listed, runs, "listing");
}

pub(crate) async fn claims_carry_the_trace_parent_of_their_run(store: &Store) {
    let wf = workflow();
    let runs = admit_four(store).await;
    let claimed = ok(store.claim_work_with_runs(WorkScope::All, T0, "w1", LEASE_MS, 10).await, "claim work");
    assert_eq!(claimed.len(), 4, "{claimed:?}");
    for (item, run) in &claimed {
        assert_eq!(&run.trace_parent, trace_of(&runs, &item.run_id), "work of {}", item.run_id);
    }

    // A whole round at the deadline: the four timers and the four attempts (their leases ran out).
    let deadline = T0 + i64::try_from(wf.definition.deadline_seconds).unwrap_or(0) * 1000;
    let limits = ClaimLimits { timers: 10, work: 10 };
    let due = ok(store.claim_due(WorkScope::All, deadline, "w2", LEASE_MS, limits).await, "claim round");
    assert_eq!((due.timers.len(), due.work.len()), (4, 4), "{due:?}");
    for timer in &due.timers {
        assert_eq!(timer.timer, Timer::RunDeadline);
        assert_eq!((&timer.revision, &timer.trace_parent), (&wf.revision, trace_of(&runs, &timer.run_id)));
    }
    for (item, run) in &due.work {
        assert!(item.reclaimed);
        assert_eq!(&run.trace_parent, trace_of(&runs, &item.run_id), "reclaimed work of {}", item.run_id);
    }
}
