//! Durable batches over HTTP (docs/api.md#batches): a dry run says what the
//! machine would do and writes nothing; a batch started over the runs in
//! `attention` settles every one through the machine — each acted on once,
//! the batch id and reason in its journal — with progress that never goes
//! backwards; what the rules refuse is counted by code; a batch's requests
//! are refused by name when a field is not usable; each run's outcome is
//! listed, the refused ones with the rule's code. The SIGKILL and SIGTERM of
//! the process working a batch: `batches_kill`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{get, journal, lose_notices, on_runtime, post, start, until_state};

/// Polls batch `id` at `url` until it ended; checks on the way that its progress never goes backwards.
pub async fn until_ended(url: &str, id: &str) -> Value {
    let started = Instant::now();
    let mut acted = 0;
    loop {
        let (status, batch) = get(&format!("{url}/v1/batches/{id}")).await;
        assert_eq!(status, 200, "{batch}");
        let done = batch["done"].as_u64().unwrap_or_default();
        let refused: u64 = batch["refused"].as_object().into_iter().flatten().filter_map(|(_, n)| n.as_u64()).sum();
        assert!(done + refused >= acted, "progress went backwards: {batch}");
        acted = done + refused;
        assert_eq!(acted + batch["remaining"].as_u64().unwrap_or(u64::MAX), batch["matched"].as_u64().unwrap_or(0));
        if batch["state"] != "running" {
            return batch;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "batch {id} did not end: {batch}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_batch_settles_every_run_in_attention_once_and_a_dry_run_writes_nothing() {
    on_runtime(async {
        let dev = start().await;
        let url = dev.url();
        lose_notices(&url, 5).await;
        let mut runs = Vec::new();
        for n in 0..5 {
            runs.push(crate::support::admit(&url, &dev.revision, &format!("batch-{n}")).await);
        }
        for run in &runs {
            until_state(&url, run, "attention").await;
        }
        let filter = json!({"workflow": "reviewed-notice", "state": "attention"});

        let entries = journal(&url, None).await.len();
        let dry = json!({"action": "reconcile", "filter": filter, "reason": "Messaging lost answers", "dryRun": true});
        let (status, preview) = post(&format!("{url}/v1/batches"), &dry).await;
        assert_eq!(status, 200, "{preview}");
        assert_eq!((preview["matched"].as_u64(), preview["wouldApply"].as_u64()), (Some(5), Some(5)), "{preview}");
        assert_eq!(preview["runs"].as_array().map(Vec::len), Some(5));
        assert_eq!(journal(&url, None).await.len(), entries, "a dry run writes nothing");
        let (_, batches) = get(&format!("{url}/v1/batches")).await;
        assert_eq!(batches["batches"], json!([]), "a dry run starts nothing");

        let start = json!({"action": "reconcile", "filter": filter, "reason": "Messaging lost answers"});
        let (status, started) = post(&format!("{url}/v1/batches"), &start).await;
        assert_eq!((status, started["matched"].as_u64()), (201, Some(5)), "{started}");
        let id = started["batchId"].as_str().unwrap_or_default().to_owned();
        let batch = until_ended(&url, &id).await;
        assert_eq!((batch["state"].as_str(), batch["done"].as_u64()), (Some("done"), Some(5)), "{batch}");
        assert_eq!(batch["reason"], "Messaging lost answers");
        for run in &runs {
            until_state(&url, run, "finished").await;
            let remarks: Vec<Value> = journal(&url, Some(run))
                .await
                .into_iter()
                .filter(|e| {
                    e["detail"].as_str().is_some_and(|d| d.contains(&format!("batch {id}: Messaging lost answers")))
                })
                .collect();
            assert_eq!(remarks.len(), 1, "{run}: the batch acted once, journaled with its id and reason");
            assert_eq!(remarks[0]["actor"], json!(dev_subject()), "{:?}", remarks[0]);
        }
        let messages: BTreeMap<Option<String>, u64> =
            dev.sims.messaging.effects().into_iter().map(|e| (e.idempotency_key, e.effects)).collect();
        assert_eq!(messages.len(), 5, "one notice per run");
        assert!(messages.values().all(|n| *n == 1), "each notice's effect once: {messages:?}");

        // Cancelling ended runs: the rules have nothing to do, counted by code.
        let ended = json!({"action": "cancel", "filter": {"workflow": "reviewed-notice", "state": "finished"}, "reason": "tidy"});
        let (status, started) = post(&format!("{url}/v1/batches"), &ended).await;
        assert_eq!(status, 201, "{started}");
        let batch = until_ended(&url, started["batchId"].as_str().unwrap_or_default()).await;
        assert_eq!(batch["refused"], json!({"nothing-to-do": 5}), "{batch}");
        assert_eq!(batch["done"], 0);
        // Each refused run is listed with the rule's code, in run id order, paged.
        let ended_id = started["batchId"].as_str().unwrap_or_default();
        let (status, refused) = get(&format!("{url}/v1/batches/{ended_id}/runs?outcome=refused&limit=3")).await;
        assert_eq!(status, 200, "{refused}");
        let mut sorted = runs.clone();
        sorted.sort();
        let page: Vec<(&str, &str, &str)> = refused["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let field = |f: &str| r[f].as_str().unwrap_or_default();
                (field("runId"), field("outcome"), field("code"))
            })
            .collect();
        let first: Vec<(&str, &str, &str)> =
            sorted[..3].iter().map(|r| (r.as_str(), "refused", "nothing-to-do")).collect();
        assert_eq!(page, first, "{refused}");
        let next = refused["next"].as_str().unwrap_or_default();
        let (_, rest) = get(&format!("{url}/v1/batches/{ended_id}/runs?outcome=refused&after={next}")).await;
        let rest: Vec<&str> =
            rest["runs"].as_array().into_iter().flatten().filter_map(|r| r["runId"].as_str()).collect();
        assert_eq!(rest, sorted[3..].iter().map(String::as_str).collect::<Vec<_>>());
        let (_, done) = get(&format!("{url}/v1/batches/{ended_id}/runs?outcome=done")).await;
        assert_eq!(done, json!({"runs": [], "next": null}));
        // A batch over named runs matches those only (any case).
        let named = json!({"runs": [runs[0].to_uppercase(), runs[1]]});
        let dry = json!({"action": "cancel", "filter": named, "reason": "two of them", "dryRun": true});
        let (status, preview) = post(&format!("{url}/v1/batches"), &dry).await;
        assert_eq!((status, preview["matched"].as_u64()), (200, Some(2)), "{preview}");
        let (status, error) = get(&format!("{url}/v1/batches/{ended_id}/runs?outcome=lost")).await;
        assert_eq!((status, error["code"].as_str()), (400, Some("request.invalid")), "{error}");

        // Cancelling a batch that ended changes nothing.
        let (status, cancelled) = post(&format!("{url}/v1/batches/{id}/cancel"), &json!({})).await;
        assert_eq!((status, &cancelled["changed"], &cancelled["state"]), (200, &json!(false), &json!("done")));
        let (_, listed) = get(&format!("{url}/v1/batches")).await;
        assert_eq!(listed["batches"].as_array().map(Vec::len), Some(2), "{listed}");
    });
}

/// The dev stack's operator subject.
fn dev_subject() -> &'static str {
    "dev-operator"
}

#[test]
fn a_batch_request_names_what_is_wrong() {
    on_runtime(async {
        let dev = start().await;
        let url = dev.url();
        for (body, names) in [
            (json!({"action": "delete", "reason": "x"}), "`action`"),
            (json!({"action": "cancel"}), "`reason`"),
            (json!({"action": "cancel", "reason": "  "}), "`reason`"),
            (json!({"action": "cancel", "reason": "x", "filter": {"colour": "blue"}}), "unknown filter `colour`"),
            (json!({"action": "cancel", "reason": "x", "filter": {"state": "sleeping"}}), "filter `state`"),
            (json!({"action": "cancel", "reason": "x", "filter": {"from": "yesterday"}}), "filter `from`"),
            (json!({"action": "cancel", "reason": "x", "extra": 1}), "unknown field `extra`"),
            (json!({"action": "cancel", "reason": "x", "filter": {"runs": []}}), "filter `runs`"),
            (json!({"action": "cancel", "reason": "x", "filter": {"runs": ["not-a-run"]}}), "filter `runs`"),
            (
                json!({"action": "cancel", "reason": "x", "filter": {"runs": ["0199c8a05c2e7d419b3a6f1e2d4c8a10"]}}),
                "filter `runs`",
            ),
            (
                json!({"action": "cancel", "reason": "x", "filter": {"runs": ["0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10"]}}),
                "filter `runs`",
            ),
        ] {
            let (status, error) = post(&format!("{url}/v1/batches"), &body).await;
            assert_eq!((status, error["code"].as_str()), (400, Some("request.invalid")), "{body}: {error}");
            assert!(error["message"].as_str().is_some_and(|m| m.contains(names)), "{body}: {error}");
        }
        let (status, error) = get(&format!("{url}/v1/batches/0199c8a0-0000-7000-8000-000000000000")).await;
        assert_eq!((status, error["code"].as_str()), (404, Some("batch.unknown")), "{error}");
    });
}
