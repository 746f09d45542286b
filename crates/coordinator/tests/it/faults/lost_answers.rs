//! Answers lost after the product acted: the effect is `unknown`, the run waits
//! in `attention`, and only an operator settles it — by `reconcile` (messaging
//! keeps receipts) or by `retry-same` (the product deduplicates the original
//! key). An expired receipt proves nothing.

use std::time::Duration;

use serde_json::{Value, json};

use super::eager_stack;
use crate::support::on_runtime;
use crate::support::stack::{Stack, StackOptions, attempts, effect, step};

const NOTICE: &str = "submit-message/v1";
const REVIEW: &str = "submit-review-request/v1";

/// Waits for the run to need attention at send-notice with the effect unknown; checks what inspection offers.
async fn unknown_notice(stack: &Stack, run: &str) -> Value {
    let inspection = stack.settled(run).await;
    assert_eq!(inspection["state"], "attention", "{inspection}");
    assert_eq!(inspection["attention"], json!({"reason": "unknown-effect", "step": "send-notice"}));
    let notice = step(&inspection, "send-notice");
    assert_eq!(notice["call"]["effect"], "unknown", "{inspection}");
    assert_eq!(notice["recoveryActions"], json!(["reconcile", "retry-same", "cancel"]), "{inspection}");
    inspection
}

/// Asks for `reconcile` of send-notice and waits for the receipt lookup's answer (the run
/// stays in `attention` while it is under way).
async fn reconcile(stack: &Stack, run: &str) -> Value {
    let (status, answer) = stack.operate(run, "send-notice", "reconcile").await;
    assert_eq!(status, 202, "{answer}");
    stack.until(run, "the receipt lookup answered", |i| step(i, "send-notice")["call"]["pending"].is_null()).await
}

/// Settles the run's unknown notice by `retry-same`: the saved command is
/// resent with its original key, and the product deduplicates it (two
/// requests, one effect); the run then finishes with notice-sent.
async fn resent(stack: &Stack, run: &str) -> Value {
    let (status, answer) = stack.operate(run, "send-notice", "retry-same").await;
    assert_eq!(status, 202, "{answer}");
    let finished = notice_sent(stack, run).await;
    assert_eq!(attempts(&finished, "send-notice"), 2, "{finished}");
    let counted = stack.count_of("messaging", NOTICE, run, "send-notice").await;
    assert_eq!(counted, (2, 1), "the product deduplicated the resent command");
    finished
}

/// Asserts the run finished with notice-sent and the review request was made once.
async fn notice_sent(stack: &Stack, run: &str) -> Value {
    let inspection = stack.settled(run).await;
    assert_eq!((inspection["state"].as_str(), inspection["outcome"].as_str()), (Some("finished"), Some("notice-sent")));
    assert_eq!(effect(&inspection, "send-notice"), "accepted", "{inspection}");
    assert_eq!(stack.count_of("casework", REVIEW, run, "request-review").await, (1, 1));
    inspection
}

#[test]
fn a_lost_notice_is_settled_by_reconcile_and_another_by_retry_same() {
    on_runtime(async {
        let stack = eager_stack(&[], 5, None).await;

        // Messaging acts, then the connection closes without an answer.
        stack.lose_notices(1).await;
        let first = stack.admit("lost-1").await;
        unknown_notice(&stack, &first).await;
        assert_eq!(stack.count_of("messaging", NOTICE, &first, "send-notice").await, (1, 1));
        // The receipt of the original key settles it: nothing is sent again.
        reconcile(&stack, &first).await;
        let finished = notice_sent(&stack, &first).await;
        // Settled by the receipt, not by a second attempt (`lastReceipt` shows only lookups that settled nothing).
        assert_eq!(attempts(&finished, "send-notice"), 1, "{finished}");
        assert_eq!(step(&finished, "send-notice")["call"]["lastReceipt"], Value::Null, "{finished}");
        assert_eq!(stack.count_of("messaging", NOTICE, &first, "send-notice").await, (1, 1));
        assert!(stack.view(&first).await["output"]["messageId"].is_string());

        // The same loss, settled by resending the saved command with its original key.
        stack.lose_notices(1).await;
        let second = stack.admit("lost-2").await;
        unknown_notice(&stack, &second).await;
        assert_eq!(stack.count_of("messaging", NOTICE, &second, "send-notice").await, (1, 1));
        resent(&stack, &second).await;
        assert_eq!(stack.effects("messaging").await.len(), 2, "one key per run");
    });
}

#[test]
fn an_expired_receipt_leaves_the_effect_unknown_until_retry_same() {
    on_runtime(async {
        let stack = eager_stack(&[], 5, None).await;
        stack.lose_notices(1).await;
        let run = stack.admit("expired-1").await;
        unknown_notice(&stack, &run).await;

        // Messaging forgets the receipts it showed (it still knows the key).
        stack.fault("messaging", json!({"operation": NOTICE, "fault": "expire-receipts"})).await;
        let looked = reconcile(&stack, &run).await;
        let notice = step(&looked, "send-notice");
        assert_eq!(notice["call"]["lastReceipt"], "expired", "{looked}");
        assert_eq!(looked["state"], "attention", "an expired receipt proves nothing: {looked}");
        assert_eq!(notice["call"]["effect"], "unknown", "{looked}");
        assert_eq!(notice["recoveryActions"], json!(["reconcile", "retry-same", "cancel"]), "{looked}");
        assert_eq!(stack.count_of("messaging", NOTICE, &run, "send-notice").await, (1, 1));

        resent(&stack, &run).await;
    });
}

#[test]
fn a_notice_answered_after_the_timeout_is_unknown_and_never_resent_by_itself() {
    on_runtime(async {
        // Requests time out after 1 s; messaging acts at once and answers after 3 s.
        let stack = eager_stack(&[], 1, None).await;
        stack.fault("messaging", json!({"operation": NOTICE, "fault": "timeout", "delaySeconds": 3})).await;
        let run = stack.admit("slow-1").await;
        unknown_notice(&stack, &run).await;
        assert_eq!(stack.count_of("messaging", NOTICE, &run, "send-notice").await, (1, 1));

        // Nothing resends it on its own (an absence over a window, not a speed claim).
        tokio::time::sleep(Duration::from_secs(3)).await;
        let still = stack.inspect(&run).await;
        assert_eq!(still["state"], "attention", "{still}");
        assert_eq!(attempts(&still, "send-notice"), 1, "{still}");
        assert_eq!(stack.count_of("messaging", NOTICE, &run, "send-notice").await, (1, 1));

        resent(&stack, &run).await;
    });
}

#[test]
fn an_unknown_notice_on_an_expired_run_can_be_reconciled_but_not_resent() {
    on_runtime(async {
        // A copy whose run deadline is 8 s (the review wait would time out after 6 s; casework decides after 200 ms).
        let edits = vec![
            ("    timeoutSeconds: 1209600", "    observeEverySeconds: 1\n    timeoutSeconds: 6"),
            ("deadlineSeconds: 2592000", "deadlineSeconds: 8"),
        ];
        let stack = Stack::start(StackOptions {
            edits,
            auto_decide: Some(Duration::from_millis(200)),
            ..StackOptions::default()
        })
        .await;
        stack.lose_notices(1).await;
        let run = stack.admit("expired-run-1").await;
        unknown_notice(&stack, &run).await;

        let expired = stack.until(&run, "the run deadline", |i| i["state"] == "expired").await;
        assert_eq!(expired["failure"]["code"], "run.deadline-reached", "{expired}");
        let notice = step(&expired, "send-notice");
        assert_eq!(notice["call"]["effect"], "unknown", "an unknown effect stays visible: {expired}");
        assert_eq!(notice["recoveryActions"], json!(["reconcile"]), "{expired}");
        let (status, answer) = stack.operate(&run, "send-notice", "retry-same").await;
        assert_eq!((status, answer["code"].as_str()), (409, Some("run.deadline-reached")), "{answer}");
        assert_eq!(stack.count_of("messaging", NOTICE, &run, "send-notice").await, (1, 1), "nothing resent");

        // Reconcile only reads: the receipt shows the notice was accepted; the run stays expired.
        let settled = reconcile(&stack, &run).await;
        assert_eq!(effect(&settled, "send-notice"), "accepted", "{settled}");
        assert_eq!(settled["state"], "expired", "{settled}");
        assert_eq!(stack.count_of("messaging", NOTICE, &run, "send-notice").await, (1, 1));
    });
}

#[test]
fn a_refusal_after_a_lost_answer_never_clears_the_unknown_effect() {
    on_runtime(async {
        let stack = eager_stack(&[], 5, None).await;
        stack.lose_notices(1).await;
        let run = stack.admit("refused-later-1").await;
        unknown_notice(&stack, &run).await;

        // The resend is refused with a declared no-effect code: the first attempt may still have acted.
        let refusal = json!({"operation": NOTICE, "fault": "refuse", "code": "recipient-opted-out", "status": 409});
        stack.fault("messaging", refusal).await;
        let (status, answer) = stack.operate(&run, "send-notice", "retry-same").await;
        assert_eq!(status, 202, "{answer}");
        let refused = stack
            .until(&run, "the resend answered", |i| attempts(i, "send-notice") == 2 && i["state"] == "attention")
            .await;
        let notice = step(&refused, "send-notice");
        assert_eq!(notice["call"]["effect"], "unknown", "{refused}");
        assert_eq!(notice["call"]["refusal"], "recipient-opted-out", "{refused}");
        assert_eq!(refused["outcome"], Value::Null, "the refusal route was not taken: {refused}");
        assert_eq!(stack.count_of("messaging", NOTICE, &run, "send-notice").await, (2, 1));

        reconcile(&stack, &run).await;
        notice_sent(&stack, &run).await;
        assert_eq!(stack.count_of("messaging", NOTICE, &run, "send-notice").await, (2, 1));
    });
}
