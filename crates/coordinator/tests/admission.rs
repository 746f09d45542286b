//! Admission over HTTP (SPEC §3, §5): the idempotency rule under concurrency
//! (50 identical admissions at once create one run), and client-supplied run
//! ids (a recent UUIDv7, validated; the same request with the same id is the
//! same run; another request with a taken id is refused).

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use serde_json::{Value, json};
use support::{on_runtime, post, sample_input, start};
use uuid::{NoContext, Timestamp, Uuid};

fn v7_at(ms: u64) -> String {
    Uuid::new_v7(Timestamp::from_unix(NoContext, ms / 1000, 0)).to_string()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() * 1000)
}

#[test]
fn fifty_concurrent_identical_admissions_create_one_run() {
    on_runtime(async {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dev = start(data.path().to_path_buf()).await;
        let url = format!("{}/v1/runs", dev.url());
        let body = json!({"workflow": "reviewed-notice", "revision": dev.revision, "idempotencyKey": "same-50", "input": sample_input()});
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let (url, body) = (url.clone(), body.clone());
            tasks.push(tokio::spawn(async move { post(&url, &body).await }));
        }
        let mut answers: Vec<(u16, Value)> = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap_or_else(|e| panic!("{e}")));
        }
        let created = answers.iter().filter(|(s, _)| *s == 201).count();
        let existing = answers.iter().filter(|(s, _)| *s == 200).count();
        assert_eq!((created, existing), (1, 49), "{answers:?}");
        let mut ids: Vec<&str> = answers.iter().filter_map(|(_, a)| a["runId"].as_str()).collect();
        ids.dedup();
        assert_eq!(ids.len(), 1, "{answers:?}");
        let listed = dev.engine.store().list_runs(&Default::default(), None, 500).await;
        assert_eq!(listed.map(|p| p.runs.len()).unwrap_or_default(), 1);
    });
}

#[test]
fn a_client_may_choose_a_recent_uuidv7_run_id() {
    on_runtime(async {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dev = start(data.path().to_path_buf()).await;
        let url = format!("{}/v1/runs", dev.url());
        let admit = |run_id: &str, key: Option<&str>| {
            let mut body = json!({"workflow": "reviewed-notice", "revision": dev.revision, "input": sample_input(), "runId": run_id});
            if let Some(key) = key {
                body["idempotencyKey"] = json!(key);
            }
            body
        };
        let chosen = v7_at(now_ms() - 60_000);
        let (status, first) = post(&url, &admit(&chosen, None)).await;
        assert_eq!((status, first["runId"].as_str()), (201, Some(chosen.as_str())), "{first}");
        // The same request again: the same run.
        let (status, again) = post(&url, &admit(&chosen, None)).await;
        assert_eq!((status, again["runId"].as_str()), (200, Some(chosen.as_str())), "{again}");
        // Another request with the taken id.
        let (status, taken) = post(&url, &admit(&chosen, Some("another"))).await;
        assert_eq!((status, taken["code"].as_str()), (409, Some("run-id.taken")), "{taken}");
        // A key that admitted one run id cannot be replayed with another.
        let (status, _) = post(&url, &admit(&v7_at(now_ms()), Some("k"))).await;
        assert_eq!(status, 201);
        let (status, reused) = post(&url, &admit(&v7_at(now_ms() - 1000), Some("k"))).await;
        assert_eq!((status, reused["code"].as_str()), (409, Some("idempotency.key-reused")), "{reused}");

        let invalid = [
            ("not-a-uuid".to_owned(), "hyphenated"),
            ("6ba7b810-9dad-41d1-80b4-00c04fd430c8".to_owned(), "UUIDv7"),
            (v7_at(now_ms() - 25 * 3_600_000), "24 hours"),
            (v7_at(now_ms() + 2 * 3_600_000), "1 hour ahead"),
        ];
        for (id, why) in invalid {
            let (status, error) = post(&url, &admit(&id, None)).await;
            assert_eq!((status, error["code"].as_str()), (422, Some("run-id.invalid")), "{id}: {error}");
            assert!(error["message"].as_str().unwrap_or_default().contains(why), "{id}: {error}");
        }
        let listed = dev.engine.store().list_runs(&Default::default(), None, 500).await;
        assert_eq!(listed.map(|p| p.runs.len()).unwrap_or_default(), 2, "refused admissions left nothing behind");
    });
}

#[test]
fn a_null_run_id_or_idempotency_key_is_the_same_as_none() {
    on_runtime(async {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dev = start(data.path().to_path_buf()).await;
        let url = format!("{}/v1/runs", dev.url());
        // The OpenAPI document says so (null or absent); a contract fuzzer sends both.
        let body = json!({"workflow": "reviewed-notice", "revision": dev.revision, "input": sample_input(), "runId": null, "idempotencyKey": null});
        let (status, first) = post(&url, &body).await;
        assert_eq!(status, 201, "{first}");
        let (status, second) = post(&url, &body).await;
        assert_eq!(status, 201, "no key: a new run each time: {second}");
        assert_ne!(first["runId"], second["runId"]);
        let document: Value = serde_json::from_str(include_str!("../src/api/openapi.json")).unwrap_or(Value::Null);
        let admit = &document["components"]["schemas"]["AdmitRequest"]["properties"];
        assert_eq!(admit["runId"]["type"], json!(["string", "null"]));
        assert_eq!(admit["idempotencyKey"]["anyOf"][1], json!({"type": "null"}));
    });
}
