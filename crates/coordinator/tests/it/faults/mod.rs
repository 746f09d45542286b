//! Faults against the simulators through the RUNNING service (`coordinator
//! serve` on SQLite, simulators on their own listener;
//! docs/reference/products.md#simulators). Each test asserts the final run state (and outcome or failure) AND the
//! simulators' per-key `requests`/`effects` counts: no mutation is performed
//! more than once per idempotency key; where an operator's `retry-same` resent
//! the saved command, the product deduplicated it (requests 2, effects 1).
//!
//! | fault (docs/reference/runs.md, docs/reference/products.md) | test |
//! |---|---|
//! | answer lost after the product acted (`drop-response-after-effect`), settled by `reconcile` and by `retry-same` | `lost_answers::a_lost_notice_is_settled_by_reconcile_and_another_by_retry_same` |
//! | receipt expired (`expire-receipts`) before `reconcile` | `lost_answers::an_expired_receipt_leaves_the_effect_unknown_until_retry_same` |
//! | a declared refusal of the resend after a lost answer | `lost_answers::a_refusal_after_a_lost_answer_never_clears_the_unknown_effect` |
//! | unknown effect when the run deadline passes (`reconcile` yes, `retry-same` no) | `lost_answers::an_unknown_notice_on_an_expired_run_can_be_reconciled_but_not_resent` |
//! | slow mutation past the request timeout (`timeout`) | `lost_answers::a_notice_answered_after_the_timeout_is_unknown_and_never_resent_by_itself` |
//! | slow read past the request timeout | `outages::a_read_answered_after_the_timeout_is_read_again` |
//! | product down (connection refused), then up | `outages::a_product_that_refuses_connections_is_retried_until_it_is_back` |
//! | 503 storm with `Retry-After` (`unavailable`, count) | `outages::a_503_storm_is_retried_and_the_notice_sent_once` |
//! | 503 storm longer than `retry.maxAttempts` | `outages::a_503_storm_longer_than_max_attempts_fails_the_run_without_an_effect` |
//! | token endpoint unreachable, then up | `outages::no_token_means_nothing_is_sent_until_the_token_endpoint_is_back` |
//! | a completion after the wait's timeout (both late outcomes) | `waits::a_decision_after_the_timeout_takes_the_timeout_path` |
//! | cancel while waiting for the review | `waits::cancel_during_the_wait_follows_the_cancel_route` |
//! | cancel while a call is in flight (mutation; read) | `waits::cancel_while_a_call_is_in_flight_settles_the_call_first` |
//!
//! The projects are the flagship or copies of it with a shorter wait
//! (`observeEverySeconds: 1`, a 2 s `timeoutSeconds`) or a retry policy;
//! deployments use `observeFloorSeconds: 1`, 1 s connect timeouts and 1 s
//! request timeouts where a slow answer must time out. Timing bounds are
//! failure guards only.
//!
//! A cancel while a call is in flight (docs/reference/runs.md#cancellation):
//! a run follows `onCancel` only when it is in a step that has one (a wait);
//! a call step has none, so once
//! the call settled (its effect recorded, never forgotten) the run ends
//! `cancelled-after-effect` — or `cancelled` when the call was a read.

mod lost_answers;
mod outages;
mod waits;

use std::time::Duration;

use crate::support::deploy::EAGER;
use crate::support::stack::{Stack, StackOptions};

/// A stack on a copy of the flagship observing the review every second, with
/// `edits` of its workflow.yaml applied too; reviews decided by casework after
/// 200 ms; requests timing out after `request_seconds`; runtime.yaml edited
/// by `edit_runtime`.
async fn eager_stack(
    edits: &[(&'static str, &'static str)],
    request_seconds: u64,
    edit_runtime: Option<Box<dyn FnOnce(String) -> String>>,
) -> Stack {
    Stack::start(StackOptions {
        edits: [&[EAGER], edits].concat(),
        auto_decide: Some(Duration::from_millis(200)),
        request_seconds,
        edit_runtime,
        ..StackOptions::default()
    })
    .await
}
