//! Search keys: written with their run on every admission path — one
//! admission, many in one statement (a key-taken or gate-closed run writes
//! none), an admission from an event — read back for the run, and filtered on
//! by both listings, alone and with the idempotency key and other filters.

use coordinator_store::{Admission, GuardedAdmission, ListFilter, NewRun, RunFilter, Store, StoreError, TriggerEvent};

use super::ok;
use super::support::{T0, TestDb, first, new_run, put_flagship_package, run_id, workflow};

fn keys(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
}

async fn oldest_first(store: &Store, filter: RunFilter) -> Vec<String> {
    let page = ok(store.list_runs(&filter, None, 50).await, "list");
    page.runs.into_iter().map(|r| r.id).collect()
}

async fn newest_first(store: &Store, filter: ListFilter) -> Vec<String> {
    let page = ok(store.list_runs_newest(&filter, None, 50).await, "list newest");
    page.runs.into_iter().map(|r| r.id).collect()
}

pub(crate) async fn runs_are_found_by_their_search_keys_on_every_admission_path(db: &TestDb) {
    let store: &Store = db;
    let wf = workflow();
    put_flagship_package(store, &wf).await;
    ok(store.activate("reviewed-notice", &wf.revision, T0, None).await, "activate");
    let with = |n: u32, key: Option<&str>, pairs: &[(&str, &str)]| NewRun {
        search_keys: keys(pairs),
        ..new_run(&wf, &run_id(n), "alice", key, T0 + i64::from(n))
    };

    // One admission.
    let one = with(1, Some("case-1"), &[("applicationId", "A"), ("channel", "post")]);
    let created = store.admit(&one, || Ok::<_, StoreError>(first(&wf, &one))).await;
    assert_eq!(ok(created, "admit"), Admission::Created(run_id(1)));

    // Many in one statement: run 3 reuses run 2's key, run 4's revision is not active.
    let mut inactive = with(4, None, &[("applicationId", "A")]);
    inactive.revision = "not-active".into();
    let together: Vec<GuardedAdmission> = [
        with(2, Some("case-2"), &[("applicationId", "B")]),
        with(3, Some("case-2"), &[("applicationId", "A")]),
        inactive,
    ]
    .into_iter()
    .map(|new| GuardedAdmission { decision: first(&wf, &new), new, lease: None })
    .collect();
    let answers = ok(store.admit_guarded_batch("w1", &together).await, "admit together");
    assert_eq!(answers.iter().map(Option::is_some).collect::<Vec<_>>(), vec![true, false, false]);

    // From a product event.
    let evented = with(5, Some("case-5"), &[("applicationId", "A")]);
    let event = TriggerEvent { trigger: "submitted".into(), event_id: "evt-5".into() };
    let created = store.admit_event(&evented, &event, || Ok::<_, StoreError>(first(&wf, &evented))).await;
    assert_eq!(ok(created, "admit event"), Admission::Created(run_id(5)));

    assert_eq!(
        ok(store.run_search_keys(&run_id(1)).await, "keys 1"),
        keys(&[("applicationId", "A"), ("channel", "post")])
    );
    assert_eq!(ok(store.run_search_keys(&run_id(2)).await, "keys 2"), keys(&[("applicationId", "B")]));
    for n in [3, 4] {
        assert_eq!(ok(store.run_search_keys(&run_id(n)).await, "no run, no keys"), Vec::new(), "run {n}");
    }

    let by = |pairs: &[(&str, &str)]| RunFilter { keys: keys(pairs), ..RunFilter::default() };
    assert_eq!(oldest_first(store, by(&[("applicationId", "A")])).await, vec![run_id(1), run_id(5)]);
    assert_eq!(oldest_first(store, by(&[("applicationId", "B")])).await, vec![run_id(2)]);
    assert_eq!(oldest_first(store, by(&[("applicationId", "A"), ("channel", "post")])).await, vec![run_id(1)]);
    assert_eq!(oldest_first(store, by(&[("applicationId", "a")])).await, Vec::<String>::new(), "exact, case and all");
    assert_eq!(oldest_first(store, by(&[("channel", "A")])).await, Vec::<String>::new(), "a value under another name");
    let other_owner = RunFilter { owner: Some("bob".into()), ..by(&[("applicationId", "A")]) };
    assert_eq!(oldest_first(store, other_owner).await, Vec::<String>::new());
    let idempotent = RunFilter { idempotency_key: Some("case-2".into()), ..RunFilter::default() };
    assert_eq!(oldest_first(store, idempotent).await, vec![run_id(2)]);

    let newest = |pairs: &[(&str, &str)]| ListFilter { keys: keys(pairs), ..ListFilter::default() };
    assert_eq!(newest_first(store, newest(&[("applicationId", "A")])).await, vec![run_id(5), run_id(1)]);
    let since = ListFilter { admitted_from: Some(T0 + 2), ..newest(&[("applicationId", "A")]) };
    assert_eq!(newest_first(store, since).await, vec![run_id(5)]);
    let keyed = ListFilter { idempotency_key: Some("case-1".into()), ..newest(&[("applicationId", "A")]) };
    assert_eq!(newest_first(store, keyed).await, vec![run_id(1)]);
}
