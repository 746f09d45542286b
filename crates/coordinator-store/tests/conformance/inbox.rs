//! The attention inbox: `Store::attention_groups` (runs in attention by
//! reason, workflow and step, the longest-waiting group first; one
//! workflow's; one owner's) and `Store::attention_runs` (a group's runs,
//! longest waiting first, in pages across runs that entered attention in the
//! same millisecond).

use coordinator_core::machine::event::Event;
use coordinator_core::model::run::RunState;
use coordinator_store::{AttentionCursor, AttentionGroup, AttentionReason, ListFilter, RunRow, Store};

use super::columns::decide;
use super::listing::{admit_as, unknown_effect};
use super::ok;
use super::support::{T0, run_id, workflow};

fn group(reason: AttentionReason, workflow: &str, step: Option<&str>, runs: i64, oldest_since: i64) -> AttentionGroup {
    AttentionGroup { reason, workflow: workflow.to_owned(), step: step.map(str::to_owned), runs, oldest_since }
}

fn ids(runs: &[RunRow]) -> Vec<String> {
    runs.iter().map(|r| r.id.clone()).collect()
}

/// Every run `filter` selects, longest waiting first, in pages of `limit`.
async fn paged(store: &Store, filter: &ListFilter, limit: u32) -> Vec<String> {
    let (mut all, mut after): (Vec<String>, Option<AttentionCursor>) = (Vec::new(), None);
    loop {
        let (runs, next) = ok(store.attention_runs(filter, after.as_ref(), limit).await, "page");
        all.extend(ids(&runs));
        match next {
            Some(next) => {
                assert_eq!(runs.len(), usize::try_from(limit).unwrap_or(0), "a page before the end is full");
                after = Some(next);
            }
            None => return all,
        }
    }
}

pub(crate) async fn the_inbox_groups_runs_in_attention_oldest_first(store: &Store) {
    assert_eq!(ok(store.attention_groups(None, None).await, "empty"), vec![]);
    let wf = workflow();
    let (a, b) = (("wf-a", "a-1", "alice"), ("wf-b", "b-1", "alice"));
    let bob = ("wf-a", "a-1", "bob");
    for (n, names) in [(1, a), (2, a), (3, bob), (4, b), (5, a), (6, b), (7, a)] {
        admit_as(store, &wf, n, names, T0).await;
    }
    // Unknown effects: runs 4 and 6 of wf-b first, then 1, 3 and 2 of wf-a together.
    for n in [4, 6] {
        unknown_effect(store, &wf, &run_id(n), T0 + 10).await;
    }
    for n in [1, 3, 2] {
        unknown_effect(store, &wf, &run_id(n), T0 + 20).await;
    }
    // Restore holds: on run 5 (running) and on run 6 (in attention since T0 + 10, which it keeps).
    for n in [5, 6] {
        decide(store, &wf, &run_id(n), Event::RestoreHoldPlaced, T0 + 30).await;
    }
    let (effect, hold) = (AttentionReason::UnknownEffect, AttentionReason::RestoreHold);
    let review = Some("request-review");
    assert_eq!(
        ok(store.attention_groups(None, None).await, "groups"),
        vec![
            group(effect, "wf-b", review, 1, T0 + 10),
            group(hold, "wf-b", None, 1, T0 + 10),
            group(effect, "wf-a", review, 3, T0 + 20),
            group(hold, "wf-a", None, 1, T0 + 30),
        ],
        "run 7 works on; the oldest group first, ties by reason"
    );
    assert_eq!(
        ok(store.attention_groups(Some("wf-a"), None).await, "wf-a"),
        vec![group(effect, "wf-a", review, 3, T0 + 20), group(hold, "wf-a", None, 1, T0 + 30)]
    );
    assert_eq!(
        ok(store.attention_groups(None, Some("bob")).await, "bob's"),
        vec![group(effect, "wf-a", review, 1, T0 + 20)]
    );
    assert_eq!(ok(store.attention_groups(Some("wf-b"), Some("bob")).await, "none of bob's"), vec![]);

    // A group's runs: entered together, so by id.
    let wf_a = ListFilter {
        workflow: Some("wf-a".into()),
        attention: Some(effect),
        step: review.map(str::to_owned),
        ..ListFilter::default()
    };
    let (page, next) = ok(store.attention_runs(&wf_a, None, 2).await, "page 1");
    assert_eq!(ids(&page), [1, 2].map(run_id));
    assert_eq!(next, Some(AttentionCursor { since: T0 + 20, id: run_id(2) }));
    let (page, next) = ok(store.attention_runs(&wf_a, next.as_ref(), 2).await, "page 2");
    assert_eq!((ids(&page), next), (vec![run_id(3)], None));
    assert!(page.iter().all(|r| r.attention_since == Some(T0 + 20) && r.state == RunState::Attention));

    // Other filters: every run in attention, one owner's, one reason, one workflow.
    let all = ListFilter::default();
    assert_eq!(paged(store, &all, 2).await, [4, 6, 1, 2, 3, 5].map(run_id));
    let bobs = ListFilter { owner: Some("bob".into()), ..ListFilter::default() };
    assert_eq!(paged(store, &bobs, 2).await, vec![run_id(3)]);
    let held = ListFilter { attention: Some(hold), ..ListFilter::default() };
    assert_eq!(paged(store, &held, 1).await, [6, 5].map(run_id));
    let wf_b = ListFilter { workflow: Some("wf-b".into()), ..ListFilter::default() };
    assert_eq!(paged(store, &wf_b, 5).await, [4, 6].map(run_id));
    let running = ListFilter { state: Some(RunState::Running), ..ListFilter::default() };
    assert_eq!(ok(store.attention_runs(&running, None, 10).await, "another state"), (vec![], None));
    assert_eq!(ok(store.attention_runs(&all, None, 0).await, "limit 0"), (vec![], None));
}
