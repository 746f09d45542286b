//! The console's newest-first listing (`Store::list_runs_newest`): its order,
//! a cursor that pages across runs admitted in the same millisecond and is
//! not shifted by later admissions, and every filter alone and combined —
//! each compared with the same filter applied to every run by `matches`, the
//! listing's contract written out, then read again in pages of two.

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event};
use coordinator_core::model::run::RunState;
use coordinator_store::{Admission, AttentionReason, Cursor, ListFilter, NewRun, RunRow, Store, StoreError};

use super::columns::{decide, not_reviewable, review_answer};
use super::support::{T0, admit, first, new_run, run_id, workflow};
use super::{accepted_read, ok};

/// Admits run `n` of `workflow` pinned to `revision`, for `owner`, at `at`
/// (the store only copies the names; the machine runs reviewed-notice).
pub(crate) async fn admit_as(store: &Store, wf: &Workflow, n: u32, names: (&str, &str, &str), at: i64) -> String {
    let (workflow, revision, owner) = names;
    let new = NewRun {
        workflow: workflow.to_owned(),
        revision: revision.to_owned(),
        ..new_run(wf, &run_id(n), owner, None, at)
    };
    match store.admit(&new, || Ok::<_, StoreError>(first(wf, &new))).await {
        Ok(Admission::Created(id)) => id,
        other => panic!("admission of run {n}: {other:?}"),
    }
}

/// Puts run `id` in attention at `at`: its review request gets no answer.
pub(crate) async fn unknown_effect(store: &Store, wf: &Workflow, id: &str, at: i64) {
    decide(store, wf, id, accepted_read(), at - 1).await;
    decide(store, wf, id, review_answer(1, CallAnswer::Uncertain), at).await;
}

/// Ends run `id` at `at`: its review request is refused (outcome `review-refused`).
async fn refused(store: &Store, wf: &Workflow, id: &str, at: i64) {
    decide(store, wf, id, accepted_read(), at - 1).await;
    decide(store, wf, id, review_answer(1, not_reviewable()), at).await;
}

fn ids(runs: &[RunRow]) -> Vec<String> {
    runs.iter().map(|r| r.id.clone()).collect()
}

/// Every run, newest first, paging by `limit` through `filter`.
async fn paged(store: &Store, filter: &ListFilter, limit: u32) -> Vec<String> {
    let (mut all, mut cursor): (Vec<String>, Option<Cursor>) = (Vec::new(), None);
    loop {
        let page = ok(store.list_runs_newest(filter, cursor.as_ref(), limit).await, "page");
        assert!(page.runs.len() <= usize::try_from(limit).unwrap_or(usize::MAX), "{filter:?}");
        all.extend(ids(&page.runs));
        match page.next {
            Some(next) => {
                assert_eq!(page.runs.len(), usize::try_from(limit).unwrap_or(0), "a page before the end is full");
                cursor = Some(next);
            }
            None => return all,
        }
    }
}

/// The listing's contract: whether `filter` selects `run`.
fn matches(run: &RunRow, filter: &ListFilter) -> bool {
    let in_attention = filter.attention.is_some() || filter.step.is_some();
    filter.workflow.as_ref().is_none_or(|w| run.workflow == *w)
        && filter.state.is_none_or(|s| run.state == s)
        && (!in_attention || run.state == RunState::Attention)
        && filter.owner.as_ref().is_none_or(|o| run.owner == *o)
        && filter.revision.as_ref().is_none_or(|r| run.revision == *r)
        && filter.attention.is_none_or(|a| run.held == (a == AttentionReason::RestoreHold))
        && filter.step.as_ref().is_none_or(|s| run.attention_step.as_ref() == Some(s))
        && filter.admitted_from.is_none_or(|t| run.admitted_at >= t)
        && filter.admitted_to.is_none_or(|t| run.admitted_at < t)
        && filter.run_id.as_ref().is_none_or(|id| run.id == *id)
}

pub(crate) async fn newest_first_pages_follow_a_stable_cursor(store: &Store) {
    let wf = workflow();
    // Runs 2, 3 and 4 share a millisecond: the id breaks the tie, descending.
    for (n, at) in [(1, T0), (3, T0 + 1), (2, T0 + 1), (4, T0 + 1), (5, T0 + 2)] {
        admit(store, &wf, &run_id(n), at).await;
    }
    let all = ListFilter::default();
    let page1 = ok(store.list_runs_newest(&all, None, 2).await, "page 1");
    assert_eq!(ids(&page1.runs), vec![run_id(5), run_id(4)]);
    assert_eq!(page1.next, Some(Cursor { admitted_at: T0 + 1, id: run_id(4) }));
    // A run admitted between pages does not shift the next ones.
    admit(store, &wf, &run_id(6), T0 + 3).await;
    let page2 = ok(store.list_runs_newest(&all, page1.next.as_ref(), 2).await, "page 2");
    assert_eq!(ids(&page2.runs), vec![run_id(3), run_id(2)]);
    let page3 = ok(store.list_runs_newest(&all, page2.next.as_ref(), 2).await, "page 3");
    assert_eq!((ids(&page3.runs), page3.next), (vec![run_id(1)], None), "the last page says so");
    let exact = ok(store.list_runs_newest(&all, None, 6).await, "one page of all");
    assert_eq!((exact.runs.len(), exact.next), (6, None), "a full page with nothing after it has no next");
    let none = ok(store.list_runs_newest(&all, None, 0).await, "limit 0");
    assert_eq!((none.runs.len(), none.next), (0, None));
    let first = ok(store.list_runs_newest(&all, None, 1).await, "newest");
    assert_eq!(ids(&first.runs), vec![run_id(6)]);
}

/// Revisions as the checker writes them, alike in their first 16 characters.
const A1: &str = "sha256:0123456789a1";
const A2: &str = "sha256:0123456789a2";
const B1: &str = "sha256:0123456789b1";

pub(crate) async fn every_filter_lists_what_it_matches_newest_first(store: &Store) {
    let wf = workflow();
    // The three revisions share their first 16 characters (PostgreSQL's
    // revision index keys a run by those): a filter tells them apart whole.
    let (a1, a2, b1) = (("wf-a", A1, "alice"), ("wf-a", A2, "alice"), ("wf-b", B1, "alice"));
    let bob = |names: (&'static str, &'static str, &'static str)| (names.0, names.1, "bob");
    // (n, names, admitted): runs 3 and 4 share a millisecond.
    let runs = [
        (1, a1, T0),
        (2, bob(a1), T0 + 10),
        (3, b1, T0 + 20),
        (4, a2, T0 + 20),
        (5, bob(b1), T0 + 30),
        (6, a2, T0 + 40),
        (7, bob(a2), T0 + 50),
        (8, b1, T0 + 60),
    ];
    for (n, names, at) in runs {
        admit_as(store, &wf, n, names, at).await;
    }
    for n in [2, 3, 6, 8] {
        unknown_effect(store, &wf, &run_id(n), T0 + 100).await;
    }
    for n in [3, 5] {
        decide(store, &wf, &run_id(n), Event::RestoreHoldPlaced, T0 + 110).await;
    }
    refused(store, &wf, &run_id(4), T0 + 120).await;
    let mut everything = ok(store.list_runs_newest(&ListFilter::default(), None, 100).await, "all").runs;
    assert_eq!(ids(&everything), [8, 7, 6, 5, 4, 3, 2, 1].map(run_id), "newest first, ties by id");
    everything.sort_by(|a, b| (b.admitted_at, &b.id).cmp(&(a.admitted_at, &a.id)));

    let f = ListFilter::default;
    let some = |s: &str| Some(s.to_owned());
    let filters = [
        ListFilter { workflow: some("wf-a"), ..f() },
        ListFilter { state: Some(RunState::Attention), ..f() },
        ListFilter { state: Some(RunState::Running), ..f() },
        ListFilter { state: Some(RunState::Finished), ..f() },
        ListFilter { state: Some(RunState::Expired), ..f() },
        ListFilter { owner: some("bob"), ..f() },
        ListFilter { revision: some(A2), ..f() },
        ListFilter { attention: Some(AttentionReason::UnknownEffect), ..f() },
        ListFilter { attention: Some(AttentionReason::RestoreHold), ..f() },
        ListFilter { step: some("request-review"), ..f() },
        ListFilter { admitted_from: Some(T0 + 20), ..f() },
        ListFilter { admitted_to: Some(T0 + 20), ..f() },
        ListFilter { run_id: Some(run_id(5)), ..f() },
        ListFilter { run_id: some("no-such-run"), ..f() },
        ListFilter { workflow: some("wf-a"), state: Some(RunState::Running), ..f() },
        ListFilter { workflow: some("wf-b"), state: Some(RunState::Attention), owner: some("alice"), ..f() },
        ListFilter { revision: some(A2), state: Some(RunState::Running), ..f() },
        ListFilter { revision: some(A1), owner: some("bob"), attention: Some(AttentionReason::UnknownEffect), ..f() },
        ListFilter { workflow: some("wf-a"), admitted_from: Some(T0 + 10), admitted_to: Some(T0 + 50), ..f() },
        ListFilter { revision: some(B1), admitted_from: Some(T0 + 20), ..f() },
        ListFilter { step: some("request-review"), attention: Some(AttentionReason::UnknownEffect), ..f() },
        ListFilter { state: Some(RunState::Attention), attention: Some(AttentionReason::RestoreHold), ..f() },
        ListFilter { run_id: Some(run_id(5)), owner: some("alice"), ..f() },
        ListFilter { run_id: Some(run_id(5)), owner: some("bob"), workflow: some("wf-b"), ..f() },
        // A reason or a step asks for attention: with another state, nothing matches.
        ListFilter { state: Some(RunState::Running), attention: Some(AttentionReason::UnknownEffect), ..f() },
        ListFilter { state: Some(RunState::Finished), step: some("request-review"), ..f() },
    ];
    for filter in filters {
        let expected: Vec<String> = everything.iter().filter(|r| matches(r, &filter)).map(|r| r.id.clone()).collect();
        let listed = ok(store.list_runs_newest(&filter, None, 100).await, "list");
        assert_eq!(ids(&listed.runs), expected, "{filter:?}");
        assert_eq!(paged(store, &filter, 2).await, expected, "in pages of two: {filter:?}");
    }
    // The filters see the columns the decisions wrote.
    let finished = ListFilter { state: Some(RunState::Finished), ..f() };
    let run4 = ok(store.list_runs_newest(&finished, None, 10).await, "finished").runs;
    assert_eq!(run4.iter().map(|r| r.outcome.clone()).collect::<Vec<_>>(), vec![some("review-refused")]);
    let held = ListFilter { attention: Some(AttentionReason::RestoreHold), ..f() };
    assert_eq!(ids(&ok(store.list_runs_newest(&held, None, 10).await, "held").runs), [5, 3].map(run_id));
}

/// Stores a package of `workflow` at `revision` (the store keeps its bytes opaque).
async fn put_package(store: &Store, workflow: &str, revision: &str) {
    let package = coordinator_store::Package {
        revision: revision.into(),
        workflow: workflow.into(),
        digest: format!("digest-{revision}"),
        bytes: b"package".to_vec(),
    };
    ok(store.put_package(&package).await, "put the package");
}

/// `(revision, active, [running, attention, cancel-requested], oldest)` of each holding.
type Held = (String, bool, [u64; 3], Option<i64>);

async fn held(store: &Store, workflow: Option<&str>) -> Vec<(String, Held)> {
    let holdings = ok(store.revision_holdings(workflow).await, "holdings");
    holdings
        .into_iter()
        .map(|h| {
            let count = |s: RunState| h.unfinished.get(&s).copied().unwrap_or(u64::MAX);
            let states = [count(RunState::Running), count(RunState::Attention), count(RunState::CancelRequested)];
            assert_eq!(h.unfinished_total(), states.iter().sum::<u64>());
            (h.workflow, (h.revision, h.active, states, h.oldest_unfinished))
        })
        .collect()
}

pub(crate) async fn each_revision_says_what_it_still_holds(store: &Store) {
    let wf = workflow();
    for (workflow, revision) in [("reviewed-notice", "r-old"), ("reviewed-notice", "r-new"), ("another", "r-other")] {
        put_package(store, workflow, revision).await;
    }
    ok(store.activate("reviewed-notice", "r-old", T0, None).await, "activate r-old");
    let old = ("reviewed-notice", "r-old", "alice");
    let runs: Vec<String> = [1, 2, 3].iter().map(|n| run_id(*n)).collect();
    for n in [1, 2, 3] {
        admit_as(store, &wf, n, old, T0 + i64::from(n)).await;
    }
    unknown_effect(store, &wf, &runs[1], T0 + 20).await;
    refused(store, &wf, &runs[2], T0 + 20).await;
    ok(store.activate("reviewed-notice", "r-new", T0 + 30, None).await, "activate r-new");
    admit_as(store, &wf, 4, ("reviewed-notice", "r-new", "alice"), T0 + 40).await;

    let name = |s: &str| s.to_owned();
    assert_eq!(
        held(store, Some("reviewed-notice")).await,
        vec![
            (name("reviewed-notice"), (name("r-new"), true, [1, 0, 0], Some(T0 + 40))),
            (name("reviewed-notice"), (name("r-old"), false, [1, 1, 0], Some(T0 + 1))),
        ]
    );
    // The oldest run ends: the old revision's oldest unfinished admission moves on.
    refused(store, &wf, &runs[0], T0 + 50).await;
    let all = held(store, None).await;
    assert_eq!(
        all,
        vec![
            (name("another"), (name("r-other"), false, [0, 0, 0], None)),
            (name("reviewed-notice"), (name("r-new"), true, [1, 0, 0], Some(T0 + 40))),
            (name("reviewed-notice"), (name("r-old"), false, [0, 1, 0], Some(T0 + 2))),
        ]
    );
}
