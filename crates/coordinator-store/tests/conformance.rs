//! The store's contract, one suite run against both backends: every behaviour
//! is an `async fn(&Store)` (or `&TestDb` when it needs the URL), and
//! `conformance!` gives each a driver on a fresh SQLite file and one on a fresh
//! PostgreSQL database, migrated to the current schema (or, for upgrade tests,
//! only to the first). Claim counting lives in `conformance/redispatch.rs`,
//! the wait index and wake-ups in `conformance/waits.rs`, a worker's claim
//! round in `conformance/due.rs`, trigger events in
//! `conformance/events.rs`, the hash-chained audit journal in
//! `conformance/audit.rs`, a run's trace parent in `conformance/trace.rs`,
//! the readiness ping and the monitoring reads in `conformance/monitoring.rs`,
//! the run row's listing columns in `conformance/columns.rs`, the restore
//! fence in `conformance/fence.rs`, remote workers' lanes, offers and
//! reports in `conformance/remote.rs`, eager dispatch in
//! `conformance/eager.rs`, admissions together in `conformance/admissions.rs`, the console's
//! newest-first listing in `conformance/listing.rs` and its attention inbox
//! in `conformance/inbox.rs`, an operator's pause of a connection and the
//! shared pace in `conformance/connections.rs`, remote lanes under limits and
//! fairness under a flood in `conformance/governed.rs`.
//!
//! Runs are driven through the real state machine on reviewed-notice, so the
//! store is tested with the actions the machine really emits.

#[path = "conformance/admissions.rs"]
mod admissions;
#[path = "conformance/audit.rs"]
mod audit_chain;
#[path = "conformance/batch.rs"]
mod batch;
#[path = "conformance/batches.rs"]
mod batches;
#[path = "conformance/columns.rs"]
mod columns;
#[path = "conformance/connections.rs"]
mod connections;
#[path = "conformance/due.rs"]
mod due;
#[path = "conformance/eager.rs"]
mod eager;
#[path = "conformance/eager_limited.rs"]
mod eager_limited;
#[path = "conformance/events.rs"]
mod events;
#[path = "conformance/fence.rs"]
mod fence;
#[path = "conformance/governed.rs"]
mod governed;
#[path = "conformance/hold.rs"]
mod hold;
#[path = "conformance/inbox.rs"]
mod inbox;
#[path = "conformance/listing.rs"]
mod listing;
#[path = "conformance/monitoring.rs"]
mod monitoring;
#[path = "conformance/redispatch.rs"]
mod redispatch;
#[path = "conformance/remote.rs"]
mod remote;
#[path = "conformance/retention.rs"]
mod retention;
#[path = "conformance/search_keys.rs"]
mod search_keys;
mod support;
#[path = "conformance/trace.rs"]
mod trace;
#[path = "conformance/waits.rs"]
mod waits;

use std::collections::BTreeSet;

use admissions::many_admissions_in_one_statement_keep_each_ones_gate_and_key;
use audit_chain::{
    a_batch_chains_its_entries_as_it_commits, a_decisions_entries_share_rows_of_at_most_64,
    activations_are_journaled_when_they_change, an_edit_before_sealing_is_chained_as_written,
    an_upgrade_chains_the_entries_written_before, audit_entries_are_chained_in_order_once_sealed,
    concurrent_sealers_chain_every_entry_once, entries_link_to_the_entry_before_without_storing_its_hash,
    pending_entries_are_sealed_in_order_once, tampering_in_the_database_is_found_at_its_position,
};
use batch::{
    a_batch_applies_each_report_as_a_single_apply_would,
    a_batch_fails_whole_when_a_lease_or_a_run_moves_while_it_decides, a_batch_of_due_timers_ends_every_run,
    a_batch_writes_every_kind_of_row_as_single_applies_do, a_batch_writes_the_listing_columns_as_single_applies_do,
    a_run_twice_in_one_batch_is_refused_whole, claims_carry_the_run_as_they_read_it,
};
use batches::a_batch_acts_on_each_run_once_under_one_lease;
use columns::{
    a_snapshot_is_kept_as_its_base_and_head, admissions_write_the_listing_columns,
    an_upgrade_dates_runs_already_in_attention, listing_columns_follow_the_run,
    run_ids_are_uuids_on_postgres_and_read_back_as_text,
};
use connections::{
    a_concurrency_limit_holds_across_two_processes, a_failed_probe_opens_the_breaker_again,
    a_limit_is_shared_round_robin_across_workflows, a_paused_connection_is_neither_claimed_nor_due,
    a_paused_lane_is_offered_nothing, a_paused_limited_connection_is_neither_claimed_nor_due,
    a_rate_limit_is_one_bucket_for_every_process, a_retry_after_holds_the_connection_for_everyone,
    failures_open_the_breaker_and_then_only_a_probe_is_claimed, no_process_leases_eagerly_while_a_connection_is_paused,
};
use coordinator_core::machine::event::{CallAnswer, Event, Timer};
use coordinator_core::model::run::RunState;
use coordinator_store::{
    Admission, Claim, Cursor, Decision, Package, RunFilter, Store, StoreError, TimerItem, WorkItem, WorkKind, WorkScope,
};
use due::{
    a_claim_round_takes_both_kinds_and_says_what_is_due_next, fresh_and_expired_rows_share_one_limit, next_due,
    the_queue_tables_are_tidied_without_waiting_on_postgres,
};
use eager::{
    a_batch_leases_no_more_rows_than_the_worker_has_room_for, a_batch_leases_only_what_its_scope_and_lease_allow,
    a_batch_leases_the_work_it_queues_to_its_worker, a_receipt_lookup_is_leased_in_recovery_too,
    an_admission_leases_its_first_step_to_its_worker,
};
use eager_limited::{
    a_batch_near_the_limit_leaves_every_permit_to_the_claims, a_batch_spends_its_processs_allowance,
    a_batch_spends_the_allowances_tokens, an_admission_spends_its_processs_allowance,
    another_process_counts_an_allowance_as_in_flight, tokens_held_ahead_are_held_back_from_the_bucket,
    without_an_allowance_a_batch_leaves_its_rows_to_the_claims,
};
use events::{
    a_guarded_admission_writes_only_through_an_open_gate, a_refused_admission_records_no_event,
    an_event_admits_once_and_replays_its_run, both_admission_paths_write_the_same_rows,
    concurrent_deliveries_of_one_event_create_one_run,
};
use fence::{
    a_claim_the_database_does_not_know_is_named, the_fence_places_the_hold_with_its_evidence,
    the_fence_trips_only_on_what_the_database_forgot,
};
use governed::{
    a_flood_of_one_workflow_does_not_starve_another, a_held_or_open_remote_lane_is_offered_only_its_probe,
    a_limited_connections_rows_go_to_their_workflows_lane_at_start,
    a_remote_lane_is_offered_round_robin_across_workflows, a_remote_lane_is_offered_within_its_limit_across_processes,
    a_workers_own_limits_hold_with_the_deployments,
};
use hold::{receipts_are_claimed_on_held_runs_and_alone_in_recovery, the_restore_hold_is_placed_once_and_released};
use inbox::the_inbox_groups_runs_in_attention_oldest_first;
use listing::{
    each_revision_says_what_it_still_holds, every_filter_lists_what_it_matches_newest_first,
    newest_first_pages_follow_a_stable_cursor,
};
use monitoring::{
    connections_the_server_dropped_are_replaced, ping_answers_while_a_writer_holds_the_database,
    ping_fails_once_the_database_is_gone, queue_heads_are_the_oldest_claimable_due_rows,
    runs_in_attention_are_counted_by_workflow_and_reason, sealed_key_ids_name_the_keys_of_runs_not_finished,
};
use redispatch::{
    a_claim_after_a_lost_lease_is_reclaimed, a_new_attempt_resets_the_claim_count, a_released_claim_does_not_count,
    an_upgrade_counts_claims_taken_before_it,
};
use remote::{
    a_lease_is_renewed_by_its_owner_only, an_acquire_that_ran_out_is_offered_reclaimed,
    an_acquired_offer_reports_and_is_journaled, an_offer_that_ran_out_is_offered_again_as_it_was,
    concurrent_offers_never_hand_out_a_row_twice, in_process_claims_leave_waiting_lane_rows_and_take_expired_ones,
    lanes_are_written_for_the_listed_steps_only, offered_work_says_when_a_lane_has_work_next,
    offers_and_acquires_are_refused_while_the_fence_holds, rows_of_connections_no_longer_remote_go_in_process,
    the_report_fence_refuses_an_offer_alone,
};
use retention::{
    partitions_made_by_two_processes_at_once_are_made_once_and_none_is_skipped,
    retention_removes_ended_days_and_keeps_from_the_first_live_one,
};
use search_keys::runs_are_found_by_their_search_keys_on_every_admission_path;
use serde_json::json;
use support::{T0, admit, deciding, first, new_run, run_id, workflow};
use trace::{a_run_keeps_its_trace_parent_for_every_read, claims_carry_the_trace_parent_of_their_run};
use waits::{open_waits_are_indexed_by_reference, work_committed_elsewhere_wakes_a_listener_on_postgres};

/// `conformance!(Schema in sqlite_module, postgres_module: test, …)`.
macro_rules! conformance {
    ($schema:ident in $sqlite:ident, $postgres:ident: $($name:ident),* $(,)?) => {
        mod $sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = super::support::sqlite(super::support::Schema::$schema).await;
                    super::$name(&db).await;
                }
            )*
        }
        mod $postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = super::support::postgres(super::support::Schema::$schema).await;
                    super::$name(&db).await;
                }
            )*
        }
    };
}

conformance!(Current in on_sqlite, on_postgres:
    migrate_is_idempotent,
    a_signed_out_console_session_stays_ended_until_it_expires,
    retention_removes_ended_days_and_keeps_from_the_first_live_one,
    partitions_made_by_two_processes_at_once_are_made_once_and_none_is_skipped,
    packages_are_stored_and_activated,
    admission_is_idempotent,
    concurrent_identical_admissions_create_one_run,
    apply_persists_every_action_and_the_snapshot,
    a_stale_version_rolls_everything_back,
    a_decide_error_writes_nothing,
    claim_work_respects_not_before_leases_holds_and_limit,
    a_lost_lease_cannot_apply,
    timers_are_claimed_and_the_deadline_ends_the_run,
    list_runs_paginates_with_a_stable_cursor,
    concurrent_applies_serialise,
    a_claim_after_a_lost_lease_is_reclaimed,
    a_released_claim_does_not_count,
    a_new_attempt_resets_the_claim_count,
    open_waits_are_indexed_by_reference,
    work_committed_elsewhere_wakes_a_listener_on_postgres,
    the_queue_tables_are_tidied_without_waiting_on_postgres,
    the_restore_hold_is_placed_once_and_released,
    receipts_are_claimed_on_held_runs_and_alone_in_recovery,
    an_event_admits_once_and_replays_its_run,
    a_refused_admission_records_no_event,
    a_guarded_admission_writes_only_through_an_open_gate,
    an_admission_leases_its_first_step_to_its_worker,
    many_admissions_in_one_statement_keep_each_ones_gate_and_key,
    concurrent_deliveries_of_one_event_create_one_run,
    audit_entries_are_chained_in_order_once_sealed,
    activations_are_journaled_when_they_change,
    tampering_in_the_database_is_found_at_its_position,
    a_decisions_entries_share_rows_of_at_most_64,
    an_edit_before_sealing_is_chained_as_written,
    entries_link_to_the_entry_before_without_storing_its_hash,
    pending_entries_are_sealed_in_order_once,
    concurrent_sealers_chain_every_entry_once,
    a_batch_chains_its_entries_as_it_commits,
    runs_are_found_by_their_search_keys_on_every_admission_path,
    each_revision_says_what_it_still_holds,
    a_batch_acts_on_each_run_once_under_one_lease,
);

conformance!(Current in batch_on_sqlite, batch_on_postgres:
    a_batch_applies_each_report_as_a_single_apply_would,
    a_batch_of_due_timers_ends_every_run,
    a_run_twice_in_one_batch_is_refused_whole,
    a_batch_fails_whole_when_a_lease_or_a_run_moves_while_it_decides,
    both_admission_paths_write_the_same_rows,
    claims_carry_the_run_as_they_read_it,
    a_batch_writes_the_listing_columns_as_single_applies_do,
    a_batch_writes_every_kind_of_row_as_single_applies_do,
    a_claim_round_takes_both_kinds_and_says_what_is_due_next,
    fresh_and_expired_rows_share_one_limit,
    a_batch_leases_the_work_it_queues_to_its_worker,
    a_batch_leases_only_what_its_scope_and_lease_allow,
    a_batch_leases_no_more_rows_than_the_worker_has_room_for,
    a_receipt_lookup_is_leased_in_recovery_too,
);

conformance!(Current in connections_on_sqlite, connections_on_postgres:
    a_paused_connection_is_neither_claimed_nor_due,
    a_paused_lane_is_offered_nothing,
    no_process_leases_eagerly_while_a_connection_is_paused,
    failures_open_the_breaker_and_then_only_a_probe_is_claimed,
    a_failed_probe_opens_the_breaker_again,
    a_retry_after_holds_the_connection_for_everyone,
    a_concurrency_limit_holds_across_two_processes,
    a_rate_limit_is_one_bucket_for_every_process,
    a_paused_limited_connection_is_neither_claimed_nor_due,
    a_limit_is_shared_round_robin_across_workflows,
    a_remote_lane_is_offered_within_its_limit_across_processes,
    a_workers_own_limits_hold_with_the_deployments,
    a_held_or_open_remote_lane_is_offered_only_its_probe,
    a_flood_of_one_workflow_does_not_starve_another,
    a_limited_connections_rows_go_to_their_workflows_lane_at_start,
    a_remote_lane_is_offered_round_robin_across_workflows,
    a_batch_spends_its_processs_allowance,
    without_an_allowance_a_batch_leaves_its_rows_to_the_claims,
    a_batch_near_the_limit_leaves_every_permit_to_the_claims,
    another_process_counts_an_allowance_as_in_flight,
    a_batch_spends_the_allowances_tokens,
    an_admission_spends_its_processs_allowance,
    tokens_held_ahead_are_held_back_from_the_bucket,
);

conformance!(Current in fence_on_sqlite, fence_on_postgres:
    the_fence_trips_only_on_what_the_database_forgot,
    the_fence_places_the_hold_with_its_evidence,
    a_claim_the_database_does_not_know_is_named,
);

conformance!(Current in remote_on_sqlite, remote_on_postgres:
    lanes_are_written_for_the_listed_steps_only,
    in_process_claims_leave_waiting_lane_rows_and_take_expired_ones,
    an_acquired_offer_reports_and_is_journaled,
    an_offer_that_ran_out_is_offered_again_as_it_was,
    an_acquire_that_ran_out_is_offered_reclaimed,
    the_report_fence_refuses_an_offer_alone,
    concurrent_offers_never_hand_out_a_row_twice,
    a_lease_is_renewed_by_its_owner_only,
    rows_of_connections_no_longer_remote_go_in_process,
    offered_work_says_when_a_lane_has_work_next,
    offers_and_acquires_are_refused_while_the_fence_holds,
);

conformance!(Current in observability_on_sqlite, observability_on_postgres:
    a_run_keeps_its_trace_parent_for_every_read,
    claims_carry_the_trace_parent_of_their_run,
    ping_answers_while_a_writer_holds_the_database,
    ping_fails_once_the_database_is_gone,
    connections_the_server_dropped_are_replaced,
    sealed_key_ids_name_the_keys_of_runs_not_finished,
    a_snapshot_is_kept_as_its_base_and_head,
    run_ids_are_uuids_on_postgres_and_read_back_as_text,
    queue_heads_are_the_oldest_claimable_due_rows,
    runs_in_attention_are_counted_by_workflow_and_reason,
);

conformance!(Current in listing_on_sqlite, listing_on_postgres:
    listing_columns_follow_the_run,
    admissions_write_the_listing_columns,
    newest_first_pages_follow_a_stable_cursor,
    every_filter_lists_what_it_matches_newest_first,
    the_inbox_groups_runs_in_attention_oldest_first,
);

conformance!(Initial in upgrade_on_sqlite, upgrade_on_postgres:
    an_upgrade_counts_claims_taken_before_it,
    an_upgrade_chains_the_entries_written_before,
    an_upgrade_dates_runs_already_in_attention,
);

const LEASE_MS: i64 = 30_000;

fn accepted_read() -> Event {
    let output = json!({"recordId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", "recordType": "application", "revision": 1, "data": {}});
    Event::CallAnswered {
        step: "read-application".into(),
        attempt: 1,
        answer: CallAnswer::Accepted { output, completions: Default::default() },
    }
}

fn accepted_review(reference: &str) -> Event {
    let completions = [("result".to_owned(), reference.to_owned())].into_iter().collect();
    Event::CallAnswered {
        step: "request-review".into(),
        attempt: 1,
        answer: CallAnswer::Accepted { output: json!({"reviewRequestId": "rr-1"}), completions },
    }
}

fn ok<T>(result: Result<T, StoreError>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: {e}"))
}

async fn migrate_is_idempotent(store: &Store) {
    ok(store.migrate().await, "second migrate");
    ok(store.migrate().await, "third migrate");
    let wf = workflow();
    admit(store, &wf, &run_id(1), T0).await;
    assert!(ok(store.load(&run_id(1)).await, "load").is_some());
    assert_eq!(ok(store.revision_of(&run_id(1)).await, "revision"), Some(wf.revision.clone()));
    assert_eq!(ok(store.revision_of(&run_id(2)).await, "no such run"), None);
}

async fn a_signed_out_console_session_stays_ended_until_it_expires(store: &Store) {
    assert!(!ok(store.console_session_ended("s1").await, "before"));
    ok(store.end_console_session("s1", T0 + 1_000, T0).await, "sign out");
    ok(store.end_console_session("s1", T0 + 1_000, T0).await, "twice is once");
    assert!(ok(store.console_session_ended("s1").await, "ended"));
    assert!(!ok(store.console_session_ended("s2").await, "another session"));
    // A later sign-out removes what expired before it: the cookie is refused by its expiry then.
    ok(store.end_console_session("s2", T0 + 9_000, T0 + 2_000).await, "later");
    assert!(!ok(store.console_session_ended("s1").await, "forgotten after its expiry"));
    assert!(ok(store.console_session_ended("s2").await, "ended"));
}

async fn packages_are_stored_and_activated(store: &Store) {
    let p1 = Package { revision: "r1".into(), workflow: "w".into(), digest: "d1".into(), bytes: vec![1, 2, 3] };
    ok(store.put_package(&p1).await, "put");
    ok(store.put_package(&p1).await, "put again");
    let changed = Package { digest: "d2".into(), ..p1.clone() };
    assert!(matches!(store.put_package(&changed).await, Err(StoreError::Conflict { .. })));
    assert_eq!(ok(store.package("r1").await, "package"), Some(p1.clone()));
    assert_eq!(ok(store.package("r9").await, "package"), None);
    assert_eq!(ok(store.active("w").await, "active"), None);
    assert!(matches!(store.activate("w", "r9", T0, None).await, Err(StoreError::NotFound { .. })));
    assert!(matches!(store.activate("other", "r1", T0, None).await, Err(StoreError::Conflict { .. })));
    ok(store.activate("w", "r1", T0, None).await, "activate");
    assert_eq!(ok(store.active("w").await, "active").as_deref(), Some("r1"));
    let p2 = Package { revision: "r2".into(), digest: "d2".into(), ..p1 };
    ok(store.put_package(&p2).await, "put r2");
    ok(store.activate("w", "r2", T0, None).await, "activate r2");
    assert_eq!(ok(store.active("w").await, "active").as_deref(), Some("r2"));
    let active = ok(store.active_revisions().await, "active revisions");
    assert_eq!(active.len(), 1);
    assert_eq!(
        (active[0].workflow.as_str(), active[0].revision.as_str(), active[0].digest.as_str()),
        ("w", "r2", "d2")
    );
}

async fn admission_is_idempotent(store: &Store) {
    let wf = workflow();
    let new = new_run(&wf, &run_id(1), "alice", Some("key-1"), T0);
    let created = store.admit(&new, || Ok::<_, StoreError>(first(&wf, &new))).await;
    assert_eq!(ok(created, "admit"), Admission::Created(run_id(1)));
    let work = ok(store.work_of(&run_id(1)).await, "work");
    assert!(!work.outbox.is_empty() && !work.timers.is_empty(), "a run never exists without its first work");

    let again = new_run(&wf, &run_id(2), "alice", Some("key-1"), T0 + 5);
    let repeated = store.admit(&again, || Err::<Decision, _>("an existing run must not be decided again")).await;
    assert_eq!(ok(repeated, "repeat"), Admission::Existing(run_id(1)));

    let other_input = coordinator_store::NewRun { input_digest: "sha256:input-2".into(), ..again.clone() };
    let reused = store.admit(&other_input, || Ok::<_, StoreError>(first(&wf, &other_input))).await;
    assert!(matches!(reused, Err(StoreError::KeyReused { ref run_id }) if *run_id == support::run_id(1)), "{reused:?}");
    let other_revision = coordinator_store::NewRun { revision: "r-other".into(), ..again.clone() };
    let reused = store.admit(&other_revision, || Ok::<_, StoreError>(first(&wf, &other_revision))).await;
    assert!(matches!(reused, Err(StoreError::KeyReused { .. })), "{reused:?}");

    // Keys are scoped to owner and workflow.
    let bob = new_run(&wf, &run_id(3), "bob", Some("key-1"), T0);
    assert_eq!(
        ok(store.admit(&bob, || Ok::<_, StoreError>(first(&wf, &bob))).await, "bob"),
        Admission::Created(run_id(3))
    );
    assert!(ok(store.load(&run_id(2)).await, "load").is_none());
}

async fn concurrent_identical_admissions_create_one_run(store: &Store) {
    let wf = std::sync::Arc::new(workflow());
    let mut tasks = Vec::new();
    for n in 0..50 {
        let (store, wf) = (store.clone(), wf.clone());
        tasks.push(tokio::spawn(async move {
            let new = new_run(&wf, &run_id(100 + n), "alice", Some("same-key"), T0);
            store.admit(&new, || Ok::<_, StoreError>(first(&wf, &new))).await
        }));
    }
    let mut ids = BTreeSet::new();
    let mut created = 0;
    for task in tasks {
        let admission = ok(task.await.unwrap_or_else(|e| panic!("task: {e}")), "concurrent admit");
        created += usize::from(matches!(admission, Admission::Created(_)));
        ids.insert(admission.run_id().to_owned());
    }
    assert_eq!((created, ids.len()), (1, 1), "one run, created once: {ids:?}");
    let page = ok(store.list_runs(&RunFilter::default(), None, 100).await, "list");
    assert_eq!(page.runs.len(), 1);
}

async fn apply_persists_every_action_and_the_snapshot(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let work = ok(store.work_of(&id).await, "work");
    assert_eq!(work.outbox, vec![("read-application".to_owned(), WorkKind::Attempt, 1, T0)]);
    let deadline = T0 + i64::try_from(wf.definition.deadline_seconds).unwrap_or(0) * 1000;
    assert_eq!(work.timers, vec![(Timer::RunDeadline, deadline)]);
    assert_eq!(work.audit.first().map(|a| a.0.as_str()), Some("admission"));
    let row = ok(store.load(&id).await, "load").unwrap_or_else(|| panic!("run"));
    assert_eq!((row.version, row.state, row.held), (1, RunState::Running, false));

    let now = T0 + 1_000;
    let event = accepted_read();
    let version = ok(store.apply(&id, now, deciding(&wf, &event, now)).await, "apply");
    assert_eq!(version, 2);
    let after = ok(store.work_of(&id).await, "work");
    assert_eq!(after.outbox, vec![("request-review".to_owned(), WorkKind::Attempt, 1, now)]);
    assert_eq!(after.timers, work.timers);
    assert!(after.audit.len() > work.audit.len(), "the decision is journaled");
    let row = ok(store.load(&id).await, "load").unwrap_or_else(|| panic!("run"));
    let snapshot = support::decode(&row.snapshot).unwrap_or_else(|e| panic!("snapshot: {e}"));
    assert_eq!((row.version, row.updated_at), (2, now));
    assert_eq!(snapshot.current.as_deref(), Some("request-review"));
}

async fn a_stale_version_rolls_everything_back(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let event = accepted_read();
    ok(store.apply(&id, T0 + 1, deciding(&wf, &event, T0 + 1)).await, "apply");
    let (work, row) = (ok(store.work_of(&id).await, "work"), ok(store.load(&id).await, "load"));
    // Decided on version 1, which has moved: the actions were written, then rolled back.
    let answer = Event::CallAnswered { step: "request-review".into(), attempt: 1, answer: CallAnswer::Uncertain };
    let stale = store.apply_expecting(&id, 1, T0 + 2, deciding(&wf, &answer, T0 + 2)).await;
    assert!(matches!(stale, Err(StoreError::Stale { expected: 1, .. })), "{stale:?}");
    assert_eq!(ok(store.work_of(&id).await, "work"), work, "no row half-written");
    assert_eq!(ok(store.load(&id).await, "load"), row);
}

async fn a_decide_error_writes_nothing(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let (work, row) = (ok(store.work_of(&id).await, "work"), ok(store.load(&id).await, "load"));
    let refused = store.apply(&id, T0 + 1, |_| Err::<Decision, _>("the machine refused")).await;
    assert!(matches!(refused, Err(StoreError::Rejected(_))), "{refused:?}");
    assert_eq!((ok(store.work_of(&id).await, "work"), ok(store.load(&id).await, "load")), (work, row));
    let missing = store.apply(&run_id(9), T0, |_| Err::<Decision, _>("never called")).await;
    assert!(matches!(missing, Err(StoreError::NotFound { .. })), "{missing:?}");
}

async fn claim_work_respects_not_before_leases_holds_and_limit(store: &Store) {
    let wf = workflow();
    for n in 1..=4 {
        admit(store, &wf, &run_id(n), T0 + i64::from(n)).await;
    }
    // Run 4 is placed under a restore hold: none of its work is claimed.
    let hold = Event::RestoreHoldPlaced;
    ok(store.apply(&run_id(4), T0 + 10, deciding(&wf, &hold, T0 + 10)).await, "hold");
    assert!(ok(store.load(&run_id(4)).await, "load").is_some_and(|r| r.held));

    assert_eq!(ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "early"), vec![], "not before not_before");
    let first = ok(store.claim_work(T0 + 10, "w1", LEASE_MS, 2).await, "claim");
    let runs: Vec<_> = first.iter().map(|w| w.run_id.clone()).collect();
    assert_eq!(runs, vec![run_id(1), run_id(2)], "the limit, oldest first");
    let rest = ok(store.claim_work(T0 + 10, "w2", LEASE_MS, 10).await, "claim rest");
    assert_eq!(rest.iter().map(|w| w.run_id.clone()).collect::<Vec<_>>(), vec![run_id(3)], "leased rows are skipped");
    assert_eq!(ok(store.claim_work(T0 + 20, "w3", LEASE_MS, 10).await, "leased"), vec![]);
    let expired = ok(store.claim_work(T0 + 11 + LEASE_MS, "w3", LEASE_MS, 10).await, "after expiry");
    assert_eq!(expired.len(), 3, "expired leases can be claimed again: {expired:?}");
    assert!(ok(store.release(&Claim::Work(expired[0].clone()), "w3").await, "release"));
    assert!(!ok(store.release(&Claim::Work(expired[1].clone()), "w1").await, "not w1's"));
    let again = ok(store.claim_work(T0 + 12 + LEASE_MS, "w4", LEASE_MS, 10).await, "released");
    assert_eq!(again, vec![expired[0].clone()]);
}

async fn a_lost_lease_cannot_apply(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let mine = ok(store.claim_work(T0, "w1", LEASE_MS, 1).await, "claim");
    let expected = WorkItem {
        run_id: id.clone(),
        step: "read-application".into(),
        kind: WorkKind::Attempt,
        attempt: 1,
        reclaimed: false,
        claims: 1,
    };
    assert_eq!(mine, vec![expected.clone()]);
    let theirs = ok(store.claim_work(T0 + LEASE_MS + 1, "w2", LEASE_MS, 1).await, "take over");
    assert_eq!(theirs, vec![WorkItem { reclaimed: true, claims: 2, ..expected.clone() }]);

    let (work, row) = (ok(store.work_of(&id).await, "work"), ok(store.load(&id).await, "load"));
    let event = accepted_read();
    let lost =
        store.apply_fenced(&Claim::Work(expected.clone()), "w1", T0 + LEASE_MS + 2, deciding(&wf, &event, T0)).await;
    assert!(matches!(lost, Err(StoreError::LeaseLost { .. })), "{lost:?}");
    assert_eq!((ok(store.work_of(&id).await, "work"), ok(store.load(&id).await, "load")), (work, row));

    let stale_attempt = WorkItem { attempt: 2, ..expected.clone() };
    let wrong = store.apply_fenced(&Claim::Work(stale_attempt), "w2", T0, deciding(&wf, &event, T0)).await;
    assert!(matches!(wrong, Err(StoreError::LeaseLost { .. })), "another attempt's fence: {wrong:?}");
    let applied = store.apply_fenced(&Claim::Work(expected), "w2", T0 + LEASE_MS + 3, deciding(&wf, &event, T0)).await;
    assert_eq!(ok(applied, "fenced apply"), 2);
    let outbox = ok(store.work_of(&id).await, "work").outbox;
    assert!(outbox.iter().all(|o| o.0 != "read-application"), "the answered attempt is done: {outbox:?}");
}

async fn timers_are_claimed_and_the_deadline_ends_the_run(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let deadline = T0 + i64::try_from(wf.definition.deadline_seconds).unwrap_or(0) * 1000;
    assert_eq!(next_due(store, WorkScope::All).await, Some(T0), "the first attempt is due at once");
    assert_eq!(ok(store.claim_timers(deadline - 1, "w1", LEASE_MS, 10).await, "early"), vec![]);
    let claimed = ok(store.claim_timers(deadline, "w1", LEASE_MS, 10).await, "claim");
    let revision = ok(store.load(&id).await, "load").map(|r| r.revision).unwrap_or_default();
    let item =
        TimerItem { run_id: id.clone(), timer: Timer::RunDeadline, due_at: deadline, revision, trace_parent: None };
    assert_eq!(claimed, vec![item.clone()]);
    assert_eq!(ok(store.claim_timers(deadline, "w2", LEASE_MS, 10).await, "leased"), vec![]);
    // The attempt is leased too now: the next due instant is the first lease to run out.
    ok(store.claim_work(deadline, "w1", LEASE_MS, 10).await, "the attempt");
    assert_eq!(next_due(store, WorkScope::All).await, Some(deadline + LEASE_MS + 1));
    let wrong =
        store.apply_fenced(&Claim::Timer(item.clone()), "w2", deadline, |_| Err::<Decision, _>("unreached")).await;
    assert!(matches!(wrong, Err(StoreError::LeaseLost { .. })), "{wrong:?}");

    let fired = Event::TimerDue { timer: Timer::RunDeadline };
    ok(store.apply_fenced(&Claim::Timer(item), "w1", deadline, deciding(&wf, &fired, deadline)).await, "fire");
    let work = ok(store.work_of(&id).await, "work");
    assert!(work.outbox.is_empty() && work.timers.is_empty(), "EndRun removes all work: {work:?}");
    assert_eq!(ok(store.load(&id).await, "load").map(|r| r.state), Some(RunState::Expired));
    assert_eq!(next_due(store, WorkScope::All).await, None);
}

async fn list_runs_paginates_with_a_stable_cursor(store: &Store) {
    let wf = workflow();
    // Runs 1..=5; 2 and 3 share a millisecond (the id breaks the tie).
    for (n, at) in [(1, T0), (3, T0 + 1), (2, T0 + 1), (4, T0 + 2), (5, T0 + 3)] {
        admit(store, &wf, &run_id(n), at).await;
    }
    let all = RunFilter::default();
    let page1 = ok(store.list_runs(&all, None, 2).await, "page 1");
    assert_eq!(page1.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![run_id(1), run_id(2)]);
    assert_eq!(page1.next, Some(Cursor { admitted_at: T0 + 1, id: run_id(2) }));
    // A run admitted between pages does not shift the next page.
    admit(store, &wf, &run_id(6), T0 + 4).await;
    let page2 = ok(store.list_runs(&all, page1.next.as_ref(), 2).await, "page 2");
    assert_eq!(page2.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![run_id(3), run_id(4)]);
    let page3 = ok(store.list_runs(&all, page2.next.as_ref(), 2).await, "page 3");
    assert_eq!(page3.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![run_id(5), run_id(6)]);
    let page4 = ok(store.list_runs(&all, page3.next.as_ref(), 2).await, "page 4");
    assert!(page4.runs.is_empty() && page4.next.is_none());

    let bobs = RunFilter { owner: Some("bob".into()), ..RunFilter::default() };
    assert!(ok(store.list_runs(&bobs, None, 10).await, "bob").runs.is_empty());
    let hold = Event::RestoreHoldPlaced;
    ok(store.apply(&run_id(4), T0 + 9, deciding(&wf, &hold, T0 + 9)).await, "hold");
    let attention = RunFilter { state: Some(RunState::Attention), workflow: Some("reviewed-notice".into()), ..bobs };
    let attention = RunFilter { owner: Some("alice".into()), ..attention };
    let held = ok(store.list_runs(&attention, None, 10).await, "attention");
    assert_eq!(held.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![run_id(4)]);
}

async fn concurrent_applies_serialise(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    const WRITERS: u8 = 8;
    let mut tasks = Vec::new();
    for n in 0..WRITERS {
        let (store, id) = (store.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            // Each decision appends one byte to what it read: a lost update would lose a byte.
            store
                .apply(&id, T0 + 1, move |snapshot| {
                    let mut next = snapshot.to_vec();
                    next.push(n);
                    let audit = coordinator_core::machine::action::Action::Audit {
                        kind: coordinator_core::machine::action::AuditKind::Operator,
                        step: None,
                        detail: format!("writer {n}"),
                    };
                    Ok::<_, StoreError>(Decision {
                        actions: vec![audit],
                        snapshot: next,
                        state: RunState::Running,
                        held: false,
                        outcome: None,
                        attention_step: None,
                        lanes: Vec::new(),
                        connections: Vec::new(),
                    })
                })
                .await
        }));
    }
    for task in tasks {
        ok(task.await.unwrap_or_else(|e| panic!("task: {e}")), "concurrent apply");
    }
    let row = ok(store.load(&id).await, "load").unwrap_or_else(|| panic!("run"));
    assert_eq!(row.version, 1 + i64::from(WRITERS), "every decision applied once");
    let appended: BTreeSet<u8> = row.snapshot.iter().rev().take(usize::from(WRITERS)).copied().collect();
    assert_eq!(appended, (0..WRITERS).collect(), "no lost update");
    let writers = ok(store.work_of(&id).await, "work").audit.iter().filter(|a| a.2.starts_with("writer")).count();
    assert_eq!(writers, usize::from(WRITERS));
}
