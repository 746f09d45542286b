//! A transition's log lines are told only after its transaction committed
//! (seed 000): an operator's cancel whose transaction the database rolls back
//! (a trigger refuses the run's update) logs no transition line and changes
//! nothing; the same cancel once the database accepts it logs its lines.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[path = "support/pg.rs"]
mod pg;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/process.rs"]
mod process;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::time::{Duration, Instant};

use coordinator_sim::SimConfig;
use deploy::{DeploymentSpec, free_port, sim_server};
use process::{Serve, json_lines, read};
use serde_json::{Value, json};
use support::{authorized_client, on_runtime, sample_input};

const GUARD: Duration = Duration::from_secs(120);

async fn execute(url: &str, statement: &str) {
    let pool = sqlx::PgPool::connect(url).await.unwrap_or_else(|e| panic!("{e}"));
    sqlx::raw_sql(statement).execute(&pool).await.unwrap_or_else(|e| panic!("{statement}: {e}"));
    pool.close().await;
}

/// The log lines about `run` for events of `kind` that say they were applied.
fn applied(log: &std::path::Path, run: &str, kind: &str) -> Vec<Value> {
    json_lines(log)
        .into_iter()
        .filter(|l| l["run_id"] == run && l["event"] == kind && l["outcome"] == "applied")
        .collect()
}

#[test]
fn a_decision_whose_transaction_rolled_back_logs_no_transition_line() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // Reviews are decided only by hand: the run waits for its review.
        let sims = sim_server(SimConfig::default()).await;
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let mut spec = DeploymentSpec::new(&db.url, &sims.base);
        spec.listen = format!("127.0.0.1:{port}");
        let runtime = spec.write(dir.path());
        process::migrate(&runtime);
        let serve = Serve::spawn(&runtime, &dir.path().join("serve.log"));
        let client = authorized_client(Duration::from_secs(30));
        assert!(process::ready(&client, &url).await, "{}", read(&serve.log));
        let (bytes, _) = deploy::package_of(&spec.project);
        let revision =
            coordinator_core::package::read(&bytes, None).unwrap_or_else(|e| panic!("{e}")).manifest.revision;
        let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": "k", "input": sample_input()});
        let admitted: Value = match client.post(format!("{url}/v1/runs")).json(&body).send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(e) => panic!("{e}"),
        };
        let run = admitted["runId"].as_str().unwrap_or_else(|| panic!("{admitted}")).to_owned();
        let started = Instant::now();
        while json_lines(&serve.log)
            .iter()
            .all(|l| !(l["run_id"] == run.as_str() && l["message"] == "waiting for a completion"))
        {
            assert!(started.elapsed() < GUARD, "the run never waited for its review:\n{}", read(&serve.log));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        execute(
            &db.url,
            &format!(
                "CREATE FUNCTION refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected'; END $$; \
                 CREATE TRIGGER refuse BEFORE UPDATE ON runs FOR EACH ROW WHEN (NEW.id = '{run}') EXECUTE FUNCTION refuse_update();"
            ),
        )
        .await;
        let cancel = client.post(format!("{url}/v1/runs/{run}/cancel")).send().await.map(|r| r.status().as_u16());
        assert_eq!(cancel.ok(), Some(500), "the database refused the decision's write");
        let view: Value = match client.get(format!("{url}/v1/runs/{run}")).send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(e) => panic!("{e}"),
        };
        assert_eq!(view["state"], "running", "nothing changed: {view}");
        // The request's own lines are written at once; a transition line would have been too.
        let lines = json_lines(&serve.log);
        assert!(
            lines
                .iter()
                .any(|l| l["message"] == "request" && l["route"] == "/v1/runs/{id}/cancel" && l["status"] == 500)
        );
        assert!(
            applied(&serve.log, &run, "cancel-requested").is_empty(),
            "a rolled-back decision was logged:\n{}",
            read(&serve.log)
        );

        execute(&db.url, "DROP TRIGGER refuse ON runs").await;
        let cancel = client.post(format!("{url}/v1/runs/{run}/cancel")).send().await.map(|r| r.status().as_u16());
        assert_eq!(cancel.ok(), Some(202));
        let told = applied(&serve.log, &run, "cancel-requested");
        assert!(
            told.iter().any(|l| l["message"] == "cancel requested"),
            "the committed cancel is told:\n{}",
            read(&serve.log)
        );
    });
}
