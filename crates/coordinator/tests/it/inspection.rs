//! `GET /v1/runs/{id}/inspection` (docs/reference/recovery.md#inspection): every step, effect and wait of a
//! run and the recovery actions the rules accept now — and nothing of the
//! input or of any product's response.

use coordinator::process::dev::Dev;
use serde_json::{Map, Value, json};

use crate::support::stack::step;
use crate::support::{
    TOKEN, admit, get, inspection_until, lose_notices, notice_strings, on_runtime, post, sample_input, start,
};

/// Values the registry holds about the applicant: a product response the workflow reads.
const APPLICANT_NAME: &str = "Erika Mustermann";
const APPLICANT_EMAIL: &str = "erika.mustermann@example.org";

/// Polls the inspection until the run is in one of `states`.
async fn inspect_until(dev: &Dev, run: &str, states: &[&str]) -> Value {
    inspection_until(&dev.url(), run, &format!("in one of {states:?}"), |i| states.iter().any(|s| i["state"] == *s))
        .await
}

#[test]
fn an_unknown_notice_shows_its_effect_and_every_recovery_action() {
    on_runtime(async {
        let dev = start().await;
        lose_notices(&dev.url(), 1).await;
        let run = admit(&dev.url(), &dev.revision, "inspect-unknown").await;

        let inspection = inspect_until(&dev, &run, &["attention"]).await;
        assert_eq!(inspection["runId"], run.as_str());
        assert_eq!(inspection["workflow"], "reviewed-notice");
        assert_eq!(inspection["revision"], dev.revision.as_str());
        assert_eq!(inspection["currentStep"], "send-notice");
        assert_eq!(inspection["attention"], json!({"reason": "unknown-effect", "step": "send-notice"}));
        assert_eq!(inspection["hold"], false);
        assert_eq!(inspection["availableActions"], json!(["cancel"]));
        assert!(inspection["deadlineAt"].is_string() && inspection["admittedAt"].is_string(), "{inspection}");

        let notice = step(&inspection, "send-notice");
        assert_eq!(notice["type"], "call");
        assert_eq!(notice["current"], true);
        assert_eq!(notice["call"]["operation"], "messaging.submit-message/v1");
        assert_eq!(notice["call"]["operationEffect"], "mutation");
        assert_eq!(notice["call"]["effect"], "unknown");
        assert_eq!(notice["call"]["attempts"], 1);
        assert_eq!(notice["call"]["receipt"], true);
        assert_eq!(notice["recoveryActions"], json!(["reconcile", "retry-same", "cancel"]));

        // The path so far, in order, with every earlier effect accepted and nothing to recover.
        let path: Vec<&str> =
            inspection["steps"].as_array().into_iter().flatten().filter_map(|s| s["step"].as_str()).collect();
        assert_eq!(path, ["read-application", "request-review", "await-review", "route-decision", "send-notice"]);
        for earlier in ["read-application", "request-review"] {
            assert_eq!(step(&inspection, earlier)["call"]["effect"], "accepted", "{inspection}");
            assert_eq!(step(&inspection, earlier)["recoveryActions"], json!([]), "{inspection}");
        }
        let wait = &step(&inspection, "await-review")["wait"];
        assert_eq!(wait["kind"], "wait-for");
        assert_eq!(wait["resolution"], "completed");
        assert!(wait["observations"].as_u64().is_some_and(|n| n >= 1), "{wait}");
        assert!(wait["startedAt"].is_string() && wait["timeoutAt"].is_string(), "{wait}");

        // Only the rules decide: reconcile settles it, and the step has nothing left to recover.
        let url = format!("{}/v1/runs/{run}/steps/send-notice/reconcile", dev.url());
        let (status, answer) = post(&url, &json!({})).await;
        assert_eq!(status, 202, "{answer}");
        let finished = inspect_until(&dev, &run, &["finished"]).await;
        assert_eq!(step(&finished, "send-notice")["call"]["effect"], "accepted", "{finished}");
        assert_eq!(step(&finished, "send-notice")["recoveryActions"], json!([]), "{finished}");
    });
}

#[test]
fn a_finished_run_has_every_effect_accepted_and_nothing_to_recover() {
    on_runtime(async {
        let dev = start().await;
        let run = admit(&dev.url(), &dev.revision, "inspect-finished").await;
        let inspection = inspect_until(&dev, &run, &["finished", "failed", "attention"]).await;
        assert_eq!(inspection["state"], "finished", "{inspection}");
        assert_eq!(inspection["outcome"], "notice-sent");
        assert_eq!(inspection["failure"], Value::Null);
        assert_eq!(inspection["attention"], Value::Null);
        assert_eq!(inspection["currentStep"], "notice-sent");
        assert_eq!(inspection["availableActions"], json!([]));
        let steps = inspection["steps"].as_array().unwrap_or_else(|| panic!("{inspection}"));
        assert_eq!(steps.len(), 6, "{inspection}");
        for (i, s) in steps.iter().enumerate() {
            assert_eq!(s["position"], i + 1, "{s}");
            assert_eq!(s["recoveryActions"], json!([]), "{s}");
            if s["type"] == "call" {
                assert_eq!(s["call"]["effect"], "accepted", "{s}");
                assert_eq!(s["call"]["pending"], Value::Null, "{s}");
            }
        }
        assert_eq!(step(&inspection, "notice-sent")["type"], "finish");
        assert_eq!(step(&inspection, "route-decision")["type"], "choose");
        assert_eq!(step(&inspection, "await-review")["wait"]["nextObservationAt"], Value::Null);

        let (status, error) =
            get(&format!("{}/v1/runs/0199c8a0-0000-7000-8000-000000000000/inspection", dev.url())).await;
        assert_eq!((status, error["code"].as_str()), (404, Some("run.unknown")), "{error}");
    });
}

#[test]
fn inspection_shows_nothing_of_the_input_or_of_product_responses() {
    on_runtime(async {
        let dev = start().await;
        let input = sample_input();
        let application = input["applicationId"].as_str().unwrap_or_default().to_owned();
        let recipient = input["recipient"]["id"].as_str().unwrap_or_default().to_owned();
        let mut record = Map::new();
        record.insert("applicantName".into(), json!(APPLICANT_NAME));
        record.insert("email".into(), json!(APPLICANT_EMAIL));
        dev.sims.breg.put_record("application", &application, record);
        lose_notices(&dev.url(), 1).await;
        let run = admit(&dev.url(), &dev.revision, "inspect-protected").await;
        inspect_until(&dev, &run, &["attention"]).await;

        // What the products answered: the review request id (also its completion reference), the notice.
        let mut secrets = vec![application, recipient, APPLICANT_NAME.to_owned(), APPLICANT_EMAIL.to_owned()];
        // Casework keeps no receipts; its ids are `review-<n>`, and this run made the only one.
        let review = "review-1";
        assert!(dev.sims.casework.review(review).is_some(), "the review request is not {review}");
        secrets.push(review.to_owned());
        let notice = notice_strings(&dev.sims, &run);
        assert!(!notice.is_empty());
        secrets.extend(notice.into_iter().filter(|s| s != "queued"));

        let read = |url: String| async move {
            let response = reqwest::Client::new()
                .get(&url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(response.status().as_u16(), 200);
            response.text().await.unwrap_or_else(|e| panic!("{url}: {e}"))
        };
        let url = format!("{}/v1/runs/{run}/inspection", dev.url());
        let in_attention = read(url.clone()).await;
        let (status, answer) =
            post(&format!("{}/v1/runs/{run}/steps/send-notice/reconcile", dev.url()), &json!({})).await;
        assert_eq!(status, 202, "{answer}");
        inspect_until(&dev, &run, &["finished"]).await;
        let finished = read(url).await;
        for text in [&in_attention, &finished] {
            for secret in &secrets {
                assert!(!text.contains(secret.as_str()), "the inspection shows `{secret}`: {text}");
            }
        }
        // The run's own read does publish the finish's output: the secrets were there to find.
        let (_, view) = get(&format!("{}/v1/runs/{run}", dev.url())).await;
        assert!(view["output"]["messageId"].is_string(), "{view}");
        assert!(!finished.contains("messageId") && !finished.contains("\"output\""), "{finished}");
    });
}
