//! Admission over HTTP (docs/reference/runs.md#admission,
//! docs/internals/engine.md#group-commit): the idempotency rule under concurrency
//! (50 identical admissions at once create one run; on PostgreSQL, where
//! admissions that arrive together share one statement, every key among
//! many at once admits one run), and client-supplied run ids (a recent
//! UUIDv7, validated; the same request with the same id is the same run;
//! another request with a taken id is refused).

use std::time::Duration;

use coordinator::engine::error::EngineError;
use coordinator::engine::{AdmitRequest, Engine};
use coordinator::process::serve::Service;
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};
use uuid::{NoContext, Timestamp, Uuid};

use crate::support::deploy::{SimServer, deployment, migrated};
use crate::support::pg::{self, PgDatabase};
use crate::support::{admission, on_runtime, post, sample_input, start, tempdir, unix_seconds};

fn v7_at(ms: u64) -> String {
    Uuid::new_v7(Timestamp::from_unix(NoContext, ms / 1000, 0)).to_string()
}

fn now_ms() -> u64 {
    u64::try_from(unix_seconds()).unwrap_or(0) * 1000
}

#[test]
fn fifty_concurrent_identical_admissions_create_one_run() {
    on_runtime(async {
        let dev = start().await;
        let url = format!("{}/v1/runs", dev.url());
        let body = admission(&dev.revision, "same-50");
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

/// `coordinator serve` on a fresh PostgreSQL database (migrated), with simulated products.
struct OnPostgres {
    service: Service,
    db: PgDatabase,
    _sims: SimServer,
    _dir: tempfile::TempDir,
}

impl OnPostgres {
    async fn start() -> OnPostgres {
        let dir = tempdir();
        let db = pg::database().await;
        let (spec, sims) = deployment(&db.url, None, false).await;
        let service = migrated(&spec.write(dir.path())).await;
        OnPostgres { service, db, _sims: sims, _dir: dir }
    }
}

/// An admission's answer: the run id and whether it was created, or why it was refused.
type Answer = Result<(String, bool), String>;

/// Admits `input` under `key` through the engine: the run id and whether it was created.
async fn admit(
    engine: &Engine,
    revision: &str,
    key: Option<String>,
    input: Value,
) -> Result<(String, bool), EngineError> {
    let request = AdmitRequest {
        workflow: "reviewed-notice".into(),
        revision: revision.to_owned(),
        input,
        idempotency_key: key,
        run_id: None,
        trace_parent: None,
    };
    engine.admit(request, "alice").await.map(|a| (a.run_id, a.created))
}

#[test]
fn many_admissions_at_once_on_postgres_admit_each_key_once() {
    on_runtime(async {
        let on = OnPostgres::start().await;
        let (engine, revision) = (on.service.engine.clone(), on.service.revision.clone());
        let mut other = sample_input();
        other["recipient"]["id"] = json!("someone-else");
        // Each key twice with the same input, each of another set of keys with two inputs, and runs without a key.
        let mut requests: Vec<(Option<String>, Value)> = Vec::new();
        for i in 0..20 {
            requests.push((Some(format!("same-{i}")), sample_input()));
            requests.push((Some(format!("same-{i}")), sample_input()));
            requests.push((Some(format!("reused-{i}")), sample_input()));
            requests.push((Some(format!("reused-{i}")), other.clone()));
            requests.push((None, sample_input()));
        }
        let tasks: Vec<_> = requests
            .into_iter()
            .map(|(key, input)| {
                let (engine, revision) = (engine.clone(), revision.clone());
                let k = key.clone();
                tokio::spawn(async move { (k, admit(&engine, &revision, key, input).await) })
            })
            .collect();
        let mut by_key: std::collections::BTreeMap<String, Vec<Answer>> = Default::default();
        let mut keyless = Vec::new();
        for task in tasks {
            let (key, answer) = task.await.unwrap_or_else(|e| panic!("{e}"));
            let answer = answer.map_err(|e| match e {
                EngineError::KeyReused => "key reused".to_owned(),
                other => panic!("admission failed: {other}"),
            });
            match key {
                Some(key) => by_key.entry(key).or_default().push(answer),
                None => keyless.push(answer),
            }
        }
        for (key, answers) in &by_key {
            let created: Vec<&String> = answers.iter().flatten().filter(|(_, c)| *c).map(|(id, _)| id).collect();
            assert_eq!(created.len(), 1, "{key}: {answers:?}");
            let other = answers.iter().find(|a| !matches!(a, Ok((_, true))));
            if key.starts_with("same-") {
                assert_eq!(other, Some(&Ok((created[0].clone(), false))), "{key}: the same request is the same run");
            } else {
                assert_eq!(other, Some(&Err("key reused".to_owned())), "{key}: another input is refused");
            }
        }
        assert!(keyless.iter().all(|a| matches!(a, Ok((_, true)))), "{keyless:?}");
        let listed = engine.store().list_runs(&Default::default(), None, 500).await;
        assert_eq!(listed.map(|p| p.runs.len()).unwrap_or_default(), 60, "one run per key and one per keyless request");
        drop(on);
    });
}

/// How long a test waits for what must happen before it says it did not (a hang, not a speed).
const PATIENCE: Duration = Duration::from_secs(60);

#[test]
fn on_postgres_an_admission_is_not_held_up_behind_a_statement_that_waits() {
    on_runtime(async {
        let on = OnPostgres::start().await;
        let (engine, revision) = (on.service.engine.clone(), on.service.revision.clone());
        // Another session takes the key "held" and does not commit: an admission under that key
        // waits in its statement until that session ends.
        let mut holder = PgConnection::connect(&on.db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let mut held = holder.begin().await.unwrap_or_else(|e| panic!("begin: {e}"));
        sqlx::query(
            "INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id) \
             VALUES ('alice', 'reviewed-notice', 'held', $1::uuid)",
        )
        .bind(Uuid::now_v7().to_string())
        .execute(&mut *held)
        .await
        .unwrap_or_else(|e| panic!("take the key: {e}"));
        let first = {
            let (engine, revision) = (engine.clone(), revision.clone());
            tokio::spawn(async move { admit(&engine, &revision, Some("held".into()), sample_input()).await })
        };
        let mut watcher = PgConnection::connect(&on.db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock' AND query LIKE '%admission_keys%'";
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while sqlx::query_scalar::<_, i64>(waiting).fetch_one(&mut watcher).await.unwrap_or(0) == 0 {
            assert!(tokio::time::Instant::now() < deadline, "the first admission's statement never waited for the key");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Another admission meanwhile goes in a statement of its own instead of queueing behind it.
        let second =
            tokio::time::timeout(PATIENCE, admit(&engine, &revision, Some("free".into()), sample_input())).await;
        assert!(matches!(second, Ok(Ok((_, true)))), "the second admission waited for the first: {second:?}");
        assert!(!first.is_finished(), "the first admission waits for the key's other session");
        held.rollback().await.unwrap_or_else(|e| panic!("rollback: {e}"));
        let first = first.await.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(first, Ok((_, true))),
            "once the key is free again the first admission creates its run: {first:?}"
        );
        drop(on);
    });
}

#[test]
fn a_client_may_choose_a_recent_uuidv7_run_id() {
    on_runtime(async {
        let dev = start().await;
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
        let dev = start().await;
        let url = format!("{}/v1/runs", dev.url());
        // The OpenAPI document says so (null or absent); a contract fuzzer sends both.
        let body = json!({"workflow": "reviewed-notice", "revision": dev.revision, "input": sample_input(), "runId": null, "idempotencyKey": null});
        let (status, first) = post(&url, &body).await;
        assert_eq!(status, 201, "{first}");
        let (status, second) = post(&url, &body).await;
        assert_eq!(status, 201, "no key: a new run each time: {second}");
        assert_ne!(first["runId"], second["runId"]);
        let document: Value = serde_json::from_str(include_str!("../../src/api/openapi.json")).unwrap_or(Value::Null);
        let admit = &document["components"]["schemas"]["AdmitRequest"]["properties"];
        assert_eq!(admit["runId"]["type"], json!(["string", "null"]));
        assert_eq!(admit["idempotencyKey"]["anyOf"][1], json!({"type": "null"}));
    });
}
