//! `GET /metrics`: after one run of the flagship example, the engine's
//! after-commit counters (admissions, events, dispatches, classified answers,
//! ended runs) and its decision latency are exposed in the Prometheus text
//! format, with labels that carry no run id, input or payload.

use serde_json::json;

use crate::support::{
    TOKEN, admission, admit, lose_notices, metric, metrics, on_runtime, post, sample_input, settled, start, until_state,
};

#[test]
fn one_finished_run_is_counted_after_commit() {
    on_runtime(async {
        let dev = start().await;
        let body = admission(&dev.revision, "metrics-1");
        let (status, admitted) = post(&format!("{}/v1/runs", dev.url()), &body).await;
        assert_eq!(status, 201, "{admitted}");
        let run = admitted["runId"].as_str().unwrap_or_default().to_owned();
        let (status, _) = post(&format!("{}/v1/runs", dev.url()), &body).await;
        assert_eq!(status, 200, "the same admission again");

        let view = settled(&dev.url(), &run).await;
        assert_eq!(view["state"], "finished", "{view}");
        // A refused command is counted as refused.
        let (status, _) = post(&format!("{}/v1/runs/{run}/steps/send-notice/retry-same", dev.url()), &json!({})).await;
        assert_eq!(status, 409);

        let response = reqwest::Client::new()
            .get(format!("{}/metrics", dev.url()))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.status().as_u16(), 200);
        let media = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert!(media.starts_with("text/plain"), "{media}");
        let text = response.text().await.unwrap_or_else(|e| panic!("{e}"));

        let value = |series: &str| metric(&text, series).unwrap_or_else(|| panic!("no `{series}` in:\n{text}"));
        assert_eq!(value("coordinator_admissions_total{result=\"created\"}"), 1.0);
        assert_eq!(value("coordinator_admissions_total{result=\"existing\"}"), 1.0);
        assert_eq!(value("coordinator_events_total{event=\"admitted\",outcome=\"applied\"}"), 1.0);
        assert_eq!(value("coordinator_events_total{event=\"retry-same-requested\",outcome=\"refused\"}"), 1.0);
        // read-application, request-review and send-notice: each dispatched once and accepted.
        assert_eq!(value("coordinator_events_total{event=\"call-answered\",outcome=\"applied\"}"), 3.0);
        assert_eq!(value("coordinator_call_answers_total{classification=\"accepted\"}"), 3.0);
        assert_eq!(value("coordinator_dispatches_total"), 3.0);
        assert!(value("coordinator_events_total{event=\"completion-observed\",outcome=\"applied\"}") >= 1.0);
        assert_eq!(value("coordinator_runs_ended_total{state=\"finished\"}"), 1.0);
        assert_eq!(value("coordinator_decision_seconds_count{event=\"admitted\"}"), 1.0);
        assert!(value("coordinator_decision_seconds_sum{event=\"call-answered\"}") > 0.0);
        assert!(text.contains("# TYPE coordinator_decision_seconds histogram"), "{text}");
        // The gauge of runs by state is read from the database at scrape time, every state listed.
        assert_eq!(value("coordinator_runs{state=\"finished\"}"), 1.0);
        assert_eq!(value("coordinator_runs{state=\"running\"}"), 0.0);
        assert_eq!(value("coordinator_runs{state=\"cancelled-after-effect\"}"), 0.0);

        // No label carries the run, its input or a product's answer.
        let input = sample_input();
        for protected in [run.as_str(), input["applicationId"].as_str().unwrap_or("?"), "person-4711", "review-1"] {
            assert!(!text.contains(protected), "`{protected}` in the metrics:\n{text}");
        }
    });
}

#[test]
fn operators_can_alert_on_attention_queues_claims_products_and_draining() {
    on_runtime(async {
        let dev = start().await;
        lose_notices(&dev.url(), 1).await;
        let run = admit(&dev.url(), &dev.revision, "metrics-2").await;
        until_state(&dev.url(), &run, "attention").await;
        let text = metrics(&dev.url()).await;
        let value =
            |text: &str, series: &str| metric(text, series).unwrap_or_else(|| panic!("no `{series}` in:\n{text}"));
        let attention = "coordinator_runs_attention{workflow=\"reviewed-notice\",reason=\"unknown-effect\"}";
        assert_eq!(value(&text, attention), 1.0);
        assert_eq!(value(&text, "coordinator_draining"), 0.0);
        assert_eq!(value(&text, "coordinator_fenced"), 0.0);
        // The activated revision was compiled once, at activation: every decision since found it cached.
        assert!(value(&text, "coordinator_definition_cache_total{result=\"hit\"}") >= 1.0);
        assert_eq!(value(&text, "coordinator_oldest_due_work_seconds"), 0.0, "nothing is waiting to be claimed");
        assert_eq!(value(&text, "coordinator_oldest_due_timer_seconds"), 0.0);
        assert!(value(&text, "coordinator_claim_round_seconds_count") >= 1.0);
        let read = "coordinator_product_request_seconds_count{request=\"attempt\",connection=\"registry\",operation=\"read-record/v1\",answer=\"accepted\"}";
        assert_eq!(value(&text, read), 1.0);
        let lost = "coordinator_product_request_seconds_count{request=\"attempt\",connection=\"messaging\",operation=\"submit-message/v1\",answer=\"uncertain\"}";
        assert_eq!(value(&text, lost), 1.0);

        // Settled: the gauge goes back to zero, and the receipt lookup is a product request of its own.
        let (status, _) = post(&format!("{}/v1/runs/{run}/steps/send-notice/reconcile", dev.url()), &json!({})).await;
        assert_eq!(status, 202);
        until_state(&dev.url(), &run, "finished").await;
        let text = metrics(&dev.url()).await;
        assert_eq!(value(&text, attention), 0.0);
        let receipt = "coordinator_product_request_seconds_count{request=\"receipt\",connection=\"messaging\",operation=\"submit-message/v1\",answer=\"found\"}";
        assert_eq!(value(&text, receipt), 1.0);
        assert!(!text.contains(run.as_str()));
    });
}
