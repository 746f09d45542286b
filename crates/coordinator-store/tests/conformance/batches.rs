//! Durable batches in the store: the runs a batch matched are fixed when it
//! starts; a run is marked `done` only in its decision's own transaction and
//! only once (a second attempt writes nothing); a refusal is recorded once;
//! one process holds a batch's lease until it runs out; a batch ends done
//! only when no run is left, and a cancelled one is worked no more. Each
//! run's outcome is listed, by outcome, in run id order.

use coordinator_core::machine::event::Event;
use coordinator_store::{ListFilter, NewBatch, Started, Store, StoreError};

use super::ok;
use super::support::{T0, admit, deciding, run_id, workflow};

const LEASE: i64 = 15_000;

fn start<'a>(id: &'a str, filter: &'a ListFilter) -> NewBatch<'a> {
    NewBatch { id, action: "cancel", filter_json: "{}", filter, reason: "tidy up", by: "ops", at: T0 + 100 }
}

pub(crate) async fn a_batch_acts_on_each_run_once_under_one_lease(store: &Store) {
    let wf = workflow();
    for n in [1, 2, 3] {
        admit(store, &wf, &run_id(n), T0 + i64::from(n)).await;
    }
    let filter = ListFilter { workflow: Some("reviewed-notice".into()), ..ListFilter::default() };
    assert_eq!(ok(store.start_batch(&start("b1", &filter)).await, "start"), Started::Matched(3));
    // A run admitted after the start is not the batch's.
    admit(store, &wf, &run_id(4), T0 + 200).await;
    assert_eq!(ok(store.batch_pending("b1", 10).await, "pending"), vec![run_id(1), run_id(2), run_id(3)]);

    // One process at a time.
    let now = T0 + 1_000;
    assert_eq!(ok(store.claim_batch("p1", now, now + LEASE).await, "claim").as_deref(), Some("b1"));
    assert_eq!(ok(store.claim_batch("p2", now + 1, now + 1 + LEASE).await, "claim held"), None);

    // Acted on in the decision's transaction, once.
    let cancel = Event::CancelRequested;
    let version = ok(store.apply_for_batch("b1", &run_id(1), now, "ops", deciding(&wf, &cancel, now)).await, "act");
    let again = store.apply_for_batch("b1", &run_id(1), now + 1, "ops", deciding(&wf, &cancel, now + 1)).await;
    assert!(matches!(again, Err(StoreError::Conflict { .. })), "{again:?}");
    let row = ok(store.load(&run_id(1)).await, "load").unwrap_or_else(|| panic!("run 1"));
    assert_eq!(row.version, version, "the second attempt wrote nothing");
    // A decision that fails marks nothing.
    let failed = store
        .apply_for_batch("b1", &run_id(2), now, "ops", |_: &[u8]| Err::<coordinator_store::Decision, _>("refused"))
        .await;
    assert!(matches!(failed, Err(StoreError::Rejected(_))), "{failed:?}");
    assert!(ok(store.batch_refused("b1", &run_id(2), "run.ended", now).await, "refused"));
    assert!(!ok(store.batch_refused("b1", &run_id(2), "run.ended", now).await, "refused twice"));
    let late = store.apply_for_batch("b1", &run_id(2), now, "ops", deciding(&wf, &cancel, now)).await;
    assert!(matches!(late, Err(StoreError::Conflict { .. })), "a refused run is not acted on: {late:?}");

    let view = ok(store.batch("b1").await, "view").unwrap_or_else(|| panic!("b1"));
    assert_eq!((view.matched, view.done, view.remaining(), view.state.as_str()), (3, 1, 1, "running"));
    // Each run with its outcome, by outcome, paged by run id.
    let all = ok(store.batch_runs("b1", None, None, 10).await, "runs");
    let outcomes: Vec<_> = all.iter().map(|r| (r.run_id.clone(), r.outcome.clone(), r.code.clone())).collect();
    assert_eq!(
        outcomes,
        vec![
            (run_id(1), Some("done".to_owned()), None),
            (run_id(2), Some("refused".to_owned()), Some("run.ended".to_owned())),
            (run_id(3), None, None)
        ]
    );
    assert_eq!(all[0].at, Some(now));
    let refused = ok(store.batch_runs("b1", Some("refused"), None, 10).await, "refused runs");
    assert_eq!(refused.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>(), vec![run_id(2)]);
    let pending = ok(store.batch_runs("b1", Some("pending"), None, 10).await, "pending runs");
    assert_eq!(pending.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>(), vec![run_id(3)]);
    let page = ok(store.batch_runs("b1", None, Some(&run_id(1)), 1).await, "second page");
    assert_eq!(page.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>(), vec![run_id(2)]);
    assert_eq!(view.refused.get("run.ended"), Some(&1));

    // Not done while a run is left; the lease runs out and another process takes it over.
    ok(store.finish_batch("b1", "p1", now).await, "finish early");
    assert_eq!(ok(store.batch("b1").await, "view").map(|b| b.state), Some("running".to_owned()));
    let later = now + LEASE + 1;
    assert_eq!(ok(store.claim_batch("p2", later, later + LEASE).await, "take over").as_deref(), Some("b1"));
    assert!(!ok(store.renew_batch("b1", "p1", later + LEASE).await, "renew lost"), "p1 lost its lease");
    assert!(ok(store.renew_batch("b1", "p2", later + LEASE).await, "renew"));
    ok(store.apply_for_batch("b1", &run_id(3), later, "ops", deciding(&wf, &cancel, later)).await, "act 3");
    assert_eq!(ok(store.batch_pending("b1", 10).await, "pending"), Vec::<String>::new());
    ok(store.finish_batch("b1", "p2", later).await, "finish");
    let view = ok(store.batch("b1").await, "view").unwrap_or_else(|| panic!("b1"));
    assert_eq!((view.state.as_str(), view.done, view.remaining(), view.ended_at), ("done", 2, 0, Some(later)));
    assert!(!ok(store.cancel_batch("b1", "ops", later).await, "cancel a done batch"));

    // A cancelled batch is worked no more.
    assert_eq!(ok(store.start_batch(&start("b2", &filter)).await, "start b2"), Started::Matched(4));
    assert_eq!(ok(store.claim_batch("p1", later, later + LEASE).await, "claim b2").as_deref(), Some("b2"));
    assert!(ok(store.cancel_batch("b2", "ops", later).await, "cancel"));
    assert!(!ok(store.renew_batch("b2", "p1", later + LEASE).await, "renew cancelled"));
    assert_eq!(ok(store.claim_batch("p2", later, later + LEASE).await, "claim after cancel"), None);
    let view = ok(store.batch("b2").await, "view").unwrap_or_else(|| panic!("b2"));
    assert_eq!((view.state.as_str(), view.cancelled_by.as_deref(), view.remaining()), ("cancelled", Some("ops"), 4));
    let listed: Vec<String> = ok(store.batches(10).await, "list").into_iter().map(|b| b.id).collect();
    assert_eq!(listed, vec!["b2".to_owned(), "b1".to_owned()]);
    assert_eq!(ok(store.count_matching(&filter, 2).await, "count"), 3, "counted up to most + 1");

    // A batch over named runs takes those and no other; an empty list takes none.
    let named = ListFilter { run_ids: Some(vec![run_id(2), run_id(4)]), ..filter.clone() };
    assert_eq!(ok(store.start_batch(&start("b3", &named)).await, "start b3"), Started::Matched(2));
    assert_eq!(ok(store.batch_pending("b3", 10).await, "pending b3"), vec![run_id(2), run_id(4)]);
    let none = ListFilter { run_ids: Some(Vec::new()), ..filter.clone() };
    assert_eq!(ok(store.count_matching(&none, 10).await, "count none"), 0);
}
